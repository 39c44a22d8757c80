// Drafts for speculative decoding: tokens a sequence proposes to verify in one forward pass, and
// how many it proposes. A draft is a guess of the tokens the model would pick: the scheduler
// evaluates them after the sequence's last token, samples the target at each position as it would
// have without them, and keeps drafted tokens while they equal what it sampled — so the output is
// the target's, token for token, under any sampling settings (a drafted token is accepted with
// exactly the probability the target gives it).
#pragma once

#include <cstdint>
#include <span>

namespace engine {

// Prompt lookup (n-gram drafting): the tokens that followed the latest earlier occurrence of the
// sequence's last n tokens, for the longest n in [min_ngram, max_ngram] that occurs, at most
// `most` of them. No weights, no cache: it pays off where the output repeats its context (code
// edits, quotes, extraction, summaries, loops). Returns how many it wrote to `out`.
int ngram_draft(std::span<const int32_t> tokens, int most, std::span<int32_t> out,
                int min_ngram = 1, int max_ngram = 3);

// How often one sequence's drafted tokens are kept, per token. Each drafted token is a trial up to
// the first rejection, so the estimate is kept / (kept + rejections) (the maximum-likelihood
// estimate under a constant rate), with each step's evidence weighing kDecay of the one after it,
// so it follows the text. It starts optimistic (kPrior), so a new sequence drafts.
class Acceptance {
 public:
  static constexpr double kDecay = 0.8, kPrior = 0.8;
  double rate() const { return kept_ / trials_; }
  void record(int drafted, int kept);

 private:
  double kept_ = kPrior, trials_ = 1;
};

// The time of a pass by its rows, measured: fitted as t0 + t1·rows by least squares over recent
// passes (each weighing kDecay of the one after it). For the model's decode steps, what one more
// verified row costs as a share of the step it joins: in a step of r rows t1 / (t0 + t1·r), plus,
// for a drafter's drafts, one drafter pass each. The slope is the last one fitted while recent
// passes had different row counts (steps that all verify as many drafts say nothing of it); before
// any, t1 counts as 0 and a pass as their mean time. The share is at least the floor: a row is
// never free (it is sampled and bookkept), and drafting must run to be measured.
class StepCost {
 public:
  static constexpr double kDecay = 0.97, kMinShare = 0.02;
  void record(int rows, double seconds);
  int passes() const { return passes_; }  // recorded
  // A pass of `rows` rows: the fit, or the mean pass without a slope; 0 before any.
  double seconds(int rows) const;
  // One more row of a step of `rows` rows, `drafter_seconds` (a drafter's pass) added to it.
  double row_share(int rows, double drafter_seconds = 0) const;

 private:
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // weighted sums of 1, rows, t, rows², rows·t
  int passes_ = 0;
  double slope_ = 0;  // the last fitted, 0 before one or where it was not positive
};

// The draft length in [0, limit] that makes the most tokens per unit of time when each drafted
// token is kept with probability `acceptance` while those before it were (so n drafts yield
// 1 + a + … + aⁿ tokens) and each costs `row_share` of the step: the smallest of the best.
int best_draft_length(double acceptance, double row_share, int limit);

// The draft length of one sequence: the best for its measured acceptance and the step's measured
// cost of a row. When drafting does not pay it stops, and probes with one token kProbeEvery steps
// later so that a text that turns repetitive is drafted again; each probe rejected doubles the
// wait, up to kProbeMost steps (a draft model catches up on every token it skipped before it
// drafts: frequent probes of a drafter that never agrees would cost that catch-up each time). No
// probes while drafts would not pay even if all were kept.
class DraftLength {
 public:
  static constexpr int kProbeEvery = 16, kProbeMost = 256;
  explicit DraftLength(int limit) : limit_(limit) {}
  // The drafts to propose this step; called once per decode step.
  int next(double row_share);
  void record(int drafted, int kept);

 private:
  int limit_;
  int idle_ = 0;  // decode steps since the last draft proposed
  int probe_every_ = kProbeEvery;
  bool probing_ = false;  // the last draft proposed was a probe
  Acceptance acceptance_;
};

}  // namespace engine
