// Drafts for speculative decoding: tokens a sequence proposes to verify in one forward pass, and
// how many it proposes. A draft is a guess of the tokens the model would pick: the scheduler
// evaluates them after the sequence's last token, samples the target at each position as it would
// have without them, and keeps drafted tokens while they equal what it sampled — so the output is
// the target's, token for token, under any sampling settings (a drafted token is accepted with
// exactly the probability the target gives it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace engine {

// Prompt lookup (n-gram drafting): the tokens that followed the latest earlier occurrence of the
// sequence's last n tokens, for the longest n in [min_ngram, max_ngram] that occurs, at most
// `most` of them. No weights, no cache: it pays off where the output repeats its context (code
// edits, quotes, extraction, summaries, loops). Returns how many it wrote to `out`.
int ngram_draft(std::span<const int32_t> tokens, int most, std::span<int32_t> out,
                int min_ngram = 1, int max_ngram = 3);

// The draft length of one sequence, adapted to its acceptance: it starts at the limit; after a
// fully accepted draft the next may be one longer (up to the limit), after a rejection it is one
// longer than what was accepted, so a drafter that keeps missing costs one token per step.
class DraftLength {
 public:
  explicit DraftLength(int limit) : limit_(limit), next_(limit) {}
  int next() const { return next_; }
  void record(int drafted, int accepted);

 private:
  int limit_, next_;
};

}  // namespace engine
