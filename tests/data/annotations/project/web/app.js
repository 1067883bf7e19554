const unused = 1;
function greet(name) {
  return "hello " + nme;
}
console.log(greet("x"));
