// Token tiles of the CPU dot kernels: compile-time tile sizes over a run-time token count.
#pragma once

namespace kernels::cpu {

// Calls tile.template operator()<kNt>(t) over the tokens: tiles of kMax while they last, then at
// most one each of the smaller powers of two. A token's arithmetic is the same in every tile
// size, so the split never changes a result; it only decides how many tokens share one reading
// of the weights.
template <int kMax, class Tile>
void for_tiles(int n_tokens, Tile&& tile) {
  static_assert(kMax == 8 || kMax == 4);
  int t = 0;
  for (; t + kMax <= n_tokens; t += kMax) tile.template operator()<kMax>(t);
  if constexpr (kMax == 8) {
    if (t + 4 <= n_tokens) {
      tile.template operator()<4>(t);
      t += 4;
    }
  }
  if (t + 2 <= n_tokens) {
    tile.template operator()<2>(t);
    t += 2;
  }
  if (t < n_tokens) tile.template operator()<1>(t);
}

}  // namespace kernels::cpu
