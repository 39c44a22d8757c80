#include "engine/draft.h"

#include <algorithm>

namespace engine {

int ngram_draft(std::span<const int32_t> tokens, int most, std::span<int32_t> out, int min_ngram,
                int max_ngram) {
  const int n_tokens = static_cast<int>(tokens.size());
  most = std::min(most, static_cast<int>(out.size()));
  if (most <= 0) return 0;
  for (int n = std::min(max_ngram, n_tokens - 1); n >= min_ngram; --n) {
    const auto suffix = tokens.last(n);
    // The latest earlier start of the suffix that has at least one token after it.
    for (int start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n;
      const int count = std::min(most, n_tokens - from);
      std::copy_n(tokens.begin() + from, count, out.begin());
      return count;
    }
  }
  return 0;
}

void Acceptance::record(int drafted, int kept) {
  if (drafted <= 0) return;
  kept_ = kDecay * kept_ + kept;
  trials_ = kDecay * trials_ + kept + (kept < drafted ? 1 : 0);
}

void StepCost::record(int rows, double seconds) {
  ++passes_;
  const double x = rows;
  w_ = kDecay * w_ + 1;
  x_ = kDecay * x_ + x;
  y_ = kDecay * y_ + seconds;
  xx_ = kDecay * xx_ + x * x;
  xy_ = kDecay * xy_ + x * seconds;
  // Weighted variance of the row counts: below a tenth of a row², one count dominates.
  const double var = xx_ / w_ - (x_ / w_) * (x_ / w_);
  if (var >= 0.1) slope_ = std::max(0.0, (xy_ / w_ - (x_ / w_) * (y_ / w_)) / var);
}

double StepCost::seconds(int rows) const {
  return w_ > 0 ? y_ / w_ + slope_ * (rows - x_ / w_) : 0;
}

double StepCost::row_share(int rows, double drafter_seconds) const {
  const double step = seconds(rows);
  const double share = (slope_ + drafter_seconds) / step;
  return step > 0 && share > kMinShare ? share : kMinShare;
}

int best_draft_length(double acceptance, double row_share, int limit) {
  int best = 0;
  double best_rate = 1, tokens = 1, term = 1;
  for (int n = 1; n <= limit; ++n) {
    term *= acceptance;
    tokens += term;
    const double rate = tokens / (1 + row_share * n);
    if (rate > best_rate) best = n, best_rate = rate;
  }
  return best;
}

int DraftLength::next(double row_share) {
  if (limit_ <= 0) return 0;
  int n = best_draft_length(acceptance_.rate(), row_share, limit_);
  // A probe measures acceptance: where drafts would not pay even if every one were kept, it could
  // not show that they do (a drafter's pass costs as much as the step it saves).
  probing_ = n == 0 && ++idle_ >= probe_every_ && best_draft_length(1.0, row_share, limit_) > 0;
  if (probing_) n = 1;
  if (n > 0) idle_ = 0;
  return n;
}

void DraftLength::record(int drafted, int kept) {
  acceptance_.record(drafted, kept);
  if (drafted <= 0) return;
  if (kept > 0)
    probe_every_ = kProbeEvery;
  else if (probing_)
    probe_every_ = std::min(2 * probe_every_, kProbeMost);
}

}  // namespace engine
