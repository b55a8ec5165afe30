// How the charts write a number on an axis and in the hover legend.

/** Three significant digits (exponent form outside [0.001, 100000)), and a real minus sign (U+2212), easy to see. */
export function formatValue(value: number): string {
  if (value === 0) return '0';
  const magnitude = Math.abs(value);
  const text =
    magnitude >= 1e-3 && magnitude < 1e5
      ? String(Number(magnitude.toPrecision(3)))
      : magnitude.toExponential(2).replace(/\.?0+e/, 'e');
  return value < 0 ? `\u2212${text}` : text;
}
