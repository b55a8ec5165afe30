// attention key tile: the k/v staging shared by the forward and dq passes (the launcher prepends it to both). A tile
// is TILE keys j0 .. j0 + TILE − 1 of kv group g: their k rows then their v rows in kvTile as vec4 (zero past
// keyEnd), and in maskTile whether each is a visible key. The workgroup's lanes (index of `lanes`) split the loads;
// the caller puts a workgroupBarrier before (the previous tile's reads) and after.

var<workgroup> kvTile: array<vec4<f32>, 2u * TILE * HS4>;
var<workgroup> maskTile: array<u32, TILE>;

fn stageKeyTile(b: u32, g: u32, j0: u32, keyEnd: u32, index: u32, lanes: u32) {
  for (var i = index; i < TILE * HS4; i += lanes) {
    let j = j0 + i / HS4;
    let d4 = i % HS4;
    var kx = vec4<f32>(0.0);
    var vx = vec4<f32>(0.0);
    if (j < keyEnd) {
      kx = loadK(kBase(b, j, g), d4);
      vx = loadV(vBase(b, j, g), d4);
    }
    kvTile[i] = kx;
    kvTile[TILE * HS4 + i] = vx;
  }
  for (var jj = index; jj < TILE; jj += lanes) {
    let j = j0 + jj;
    maskTile[jj] = select(0u, 1u, j < keyEnd && keyVisible(b, j));
  }
}
