#!/bin/sh
# Logs one call of a hook command and runs the command unchanged: the same shell, stdin,
# environment and working directory the agent CLI gave it; its stdout, stderr and exit
# status go back to the CLI as they came. $1: the log directory; $2: the command as
# `verifygate install-agent-hook` wrote it.
log=$1
call="$log/$(date +%s%N)-$$"
cat > "$call.stdin"
start=$(date +%s%N)
/bin/sh -c "$2" < "$call.stdin" > "$call.stdout" 2> "$call.stderr"
status=$?
end=$(date +%s%N)
cat "$call.stdout"
cat "$call.stderr" >&2
printf '%s %s %s\n' "$status" "$start" "$end" > "$call.status"
exit "$status"
