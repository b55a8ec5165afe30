// column-grad: the weight-gradient half of the one-dispatch backward of the row-wise ops with a per-column weight
// (rmsnorm, value-head; withColumnGrad in rowwise.ts prepends it). dWeight[c] = Σ_rows columnTerm(row, row·n + c)
// over rows (n = cols / VW vecN columns): each of the first columnTiles() workgroups owns TILE_COLS vecN columns,
// its WG lanes sum them over SLICES row slices, and slice 0 adds the slices in a fixed order and hands each column's
// sum to writeColumnGrad(col, sum). The kernel defines WG, columnTerm and writeColumnGrad; its `backward` entry
// point sends workgroups below columnTiles() here and the rest to its input gradient.
const TILE_COLS = 16u;
const SLICES = WG / TILE_COLS;

var<workgroup> columnPartial: array<vecN, WG>;

fn columnTiles() -> u32 {
  return (params.cols / VW + TILE_COLS - 1u) / TILE_COLS;
}

fn weightGradTile(tile: u32, lane: u32) {
  let n = params.cols / VW;
  let col = tile * TILE_COLS + lane % TILE_COLS;
  let slice = lane / TILE_COLS;
  var acc = vecN(0.0);
  if (col < n) {
    for (var row = slice; row < params.rows; row += SLICES) { acc += columnTerm(row, row * n + col); }
  }
  columnPartial[lane] = acc;
  workgroupBarrier();
  if (slice == 0u && col < n) {
    var sum = columnPartial[lane];
    for (var s = 1u; s < SLICES; s++) { sum += columnPartial[lane + s * TILE_COLS]; }
    writeColumnGrad(col, sum);
  }
}
