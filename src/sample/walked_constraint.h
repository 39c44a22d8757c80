// sample::WalkedConstraint — what every byte-automaton constraint shares (internal to sample/):
// following the generated tokens through the automaton, and masks that allow the tokens it can
// take, only end tokens once the document is complete, and nothing but ending once a forced token
// broke it. Subclasses say how to walk the vocabulary (with their shortcuts).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "sample/constraint.h"
#include "sample/token_index.h"

namespace sample {

// State: copyable, with feed(uint8_t) → bool, dead(), complete() and
// feed_from(const State&, uint8_t) for walk_tokens.
template <class State>
class WalkedConstraint : public Constraint {
 public:
  WalkedConstraint(std::shared_ptr<const TokenIndex> index, State initial)
      : index_(std::move(index)), initial_(initial), state_(initial) {
    levels_.assign(index_->max_bytes + 1, initial);
  }

  void mask(std::span<float> logits, std::span<const int32_t> generated) final {
    advance(generated);
    allowed_.assign(logits.size(), 0);
    const bool stuck = ended_ || broken_ || state_.dead();
    if (!stuck) compute_allowed();
    if (stuck || state_.complete()) {
      for (int32_t id = 0; id < index_->n_vocab && id < static_cast<int32_t>(logits.size()); ++id) {
        if (index_->end_of_generation[id]) allowed_[id] = 1;
      }
    }
    constexpr float kNever = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!allowed_[i]) logits[i] = kNever;
    }
  }

  bool complete(std::span<const int32_t> generated) final {
    advance(generated);
    return !broken_ && !state_.dead() && state_.complete();
  }

 protected:
  // Marks in allowed_ every token state_ can take: a walk_tokens over index_ from levels_[0],
  // after marking directly what a shortcut decides.
  virtual void compute_allowed() = 0;

  std::shared_ptr<const TokenIndex> index_;
  State initial_, state_;
  std::vector<State> levels_;
  std::vector<uint8_t> allowed_;

 private:
  // Feeds the tokens generated since the last call (or, when `generated` is not a continuation,
  // all of them from the start).
  void advance(std::span<const int32_t> generated) {
    if (generated.size() < consumed_.size() ||
        !std::equal(consumed_.begin(), consumed_.end(), generated.begin())) {
      state_ = initial_;
      consumed_.clear();
      ended_ = broken_ = false;
    }
    for (size_t i = consumed_.size(); i < generated.size(); ++i) {
      const int32_t id = generated[i];
      consumed_.push_back(id);
      if (ended_ || broken_) continue;
      if (id >= 0 && id < index_->n_vocab && index_->end_of_generation[id]) {
        ended_ = true;
        continue;
      }
      if (id < 0 || id >= index_->n_vocab || index_->bytes[id].empty()) {
        broken_ = true;
        continue;
      }
      for (char c : index_->bytes[id]) {
        if (!state_.feed(static_cast<uint8_t>(c))) {
          broken_ = true;  // a token the mask did not allow was forced in: only ending remains
          break;
        }
      }
    }
  }

  std::vector<int32_t> consumed_;
  bool ended_ = false, broken_ = false;
};

}  // namespace sample
