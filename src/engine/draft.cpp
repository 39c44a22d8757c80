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
  const double x = rows;
  w_ = kDecay * w_ + 1;
  x_ = kDecay * x_ + x;
  y_ = kDecay * y_ + seconds;
  xx_ = kDecay * xx_ + x * x;
  xy_ = kDecay * xy_ + x * seconds;
}

double StepCost::slope() const {
  // Weighted variance of the row counts: below a tenth of a row², one count dominates.
  const double var = w_ > 0 ? xx_ / w_ - (x_ / w_) * (x_ / w_) : 0;
  if (var < 0.1) return 0;
  const double t1 = (xy_ / w_ - (x_ / w_) * (y_ / w_)) / var;
  return t1 > 0 ? t1 : 0;
}

double StepCost::seconds(int rows) const {
  if (w_ <= 0) return 0;
  const double t1 = slope();
  return y_ / w_ + t1 * (rows - x_ / w_);
}

double StepCost::row_share(int rows, double drafter_seconds) const {
  const double step = seconds(rows);
  const double share = (slope() + drafter_seconds) / step;
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
