// matmul (register), A_SHUFFLE: the row-by-row product (nn, tn, no prologue) with A handed round by subgroupShuffle
// (appended to matmul-register.wgsl for devices with subgroups of at least 8 lanes; see A_SHUFFLE there).

// This lane's A values of rows 0..ROWS-1 at its k of the current 8.
var<private> laneA: array<f32, MAX_ROWS>;

// laneA[i] = A[m0+i, k] at a[rowOffset[i] + at], this lane's k (A_SHUFFLE; no prologue).
fn loadLaneA(at: u32) {
  laneA[0] = a[rowOffset[0] + at];
  laneA[1] = a[rowOffset[1] + at];
  laneA[2] = a[rowOffset[2] + at];
  laneA[3] = a[rowOffset[3] + at];
  laneA[4] = a[rowOffset[4] + at];
  laneA[5] = a[rowOffset[5] + at];
  laneA[6] = a[rowOffset[6] + at];
  laneA[7] = a[rowOffset[7] + at];
  if (ROWS > 8u) {
    laneA[8] = a[rowOffset[8] + at];
    laneA[9] = a[rowOffset[9] + at];
    laneA[10] = a[rowOffset[10] + at];
    laneA[11] = a[rowOffset[11] + at];
  }
}

// acc += A[m0.., k] ⊗ B[k, n..n+7], A[m0+i, k] being lane `source`'s laneA[i] (k is that lane's k).
fn accumulateShuffled(source: u32, lo: vec4<f32>, hi: vec4<f32>) {
  accumulateRow(0u, subgroupShuffle(laneA[0], source), lo, hi, lo, hi);
  accumulateRow(1u, subgroupShuffle(laneA[1], source), lo, hi, lo, hi);
  accumulateRow(2u, subgroupShuffle(laneA[2], source), lo, hi, lo, hi);
  accumulateRow(3u, subgroupShuffle(laneA[3], source), lo, hi, lo, hi);
  accumulateRow(4u, subgroupShuffle(laneA[4], source), lo, hi, lo, hi);
  accumulateRow(5u, subgroupShuffle(laneA[5], source), lo, hi, lo, hi);
  accumulateRow(6u, subgroupShuffle(laneA[6], source), lo, hi, lo, hi);
  accumulateRow(7u, subgroupShuffle(laneA[7], source), lo, hi, lo, hi);
  if (ROWS > 8u) {
    accumulateRow(8u, subgroupShuffle(laneA[8], source), lo, hi, lo, hi);
    accumulateRow(9u, subgroupShuffle(laneA[9], source), lo, hi, lo, hi);
    accumulateRow(10u, subgroupShuffle(laneA[10], source), lo, hi, lo, hi);
    accumulateRow(11u, subgroupShuffle(laneA[11], source), lo, hi, lo, hi);
  }
}

// acc += A[m0.., :] · B[:, n..n+7]: per 8 steps of k each lane loads A at one of them, and every step takes the rows'
// values from the lane that loaded them.
fn accumulateShuffledRows(lane: u32, n: u32, K: u32, kStride: u32) {
  for (var kb = 0u; kb < K; kb += 8u) {
    loadLaneA(min(kb + lane, K - 1u) * kStride);
    for (var i = 0u; i < min(8u, K - kb); i++) {
      let lo = loadRowOfB(kb + i, n, 0u);
      let hi = loadRowOfB(kb + i, n + 4u, 0u);
      accumulateShuffled(i, lo, hi);
    }
  }
}
