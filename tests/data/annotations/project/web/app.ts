const count: number = "three";
function square(x: number): number {
  return x * x;
}
square("4");
