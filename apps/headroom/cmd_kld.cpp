// headroom kld: how much a quantized KV cache changes the next-token distributions, measured as
// the KL divergence from an f16-KV run of the same model over the same text.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "engine/scheduler.h"
#include "lora_flags.h"

namespace cli {
namespace {

// Used when no -f is given: plain English prose, the register the shipped model was trained on.
constexpr const char* kDefaultText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
    "with her dog, "
    "Max. One day, Lily saw a big red ball under a tree. She ran to the ball and tried to pick it "
    "up, but it was "
    "too heavy. Max barked and pushed the ball with his nose. The ball rolled down the hill, and "
    "Lily and Max ran "
    "after it, laughing. At the bottom of the hill they met a boy named Tom. Tom said, \"Is this "
    "your ball? I can "
    "help you carry it.\" Lily smiled and said, \"Thank you, Tom! Do you want to play with us?\" "
    "The three friends "
    "played with the ball all afternoon. When the sun went down, Lily's mom called her home for "
    "dinner. Lily "
    "hugged Tom and said goodbye. That night, she dreamed about the big red ball and her new "
    "friend. The next "
    "morning, the sky was grey and it started to rain. Lily was sad because she could not go "
    "outside. Her mom "
    "gave her some paper and crayons, and Lily drew a picture of the park, the ball, Max and Tom. "
    "When the rain "
    "stopped, a rainbow came out, and Lily ran to the window to see it. She knew it would be a "
    "good day after all.";

// log-softmax of one logits row into `out` (double for the sums that KL needs).
void log_softmax(const float* logits, int n, std::vector<double>& out) {
  out.resize(n);
  const double m = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(logits[i] - m);
  const double log_sum = std::log(sum) + m;
  for (int i = 0; i < n; ++i) out[i] = logits[i] - log_sum;
}

struct Divergence {
  std::vector<double> kl;  // per position
  int agree = 0;           // positions where both pick the same top token
};

// KL(reference ‖ tested) at every position of `ids`, cut into windows of `window` tokens, each a
// request of its own from position 0 in both engines.
util::Result<Divergence> compare_windows(engine::Engine& reference, engine::Engine& tested,
                                         const std::vector<int32_t>& ids, int window,
                                         const std::string& adapter) {
  const int n_vocab = reference.spec().n_vocab;
  Divergence out;
  std::vector<double> la, lb;
  for (size_t start = 0; start + 1 < ids.size(); start += window) {
    const size_t end = std::min(ids.size(), start + window);
    std::span<const int32_t> tokens(ids.data() + start, end - start);
    HR_ASSIGN_OR_RETURN(auto a, engine::prompt_logits(reference, tokens, {}, adapter));
    HR_ASSIGN_OR_RETURN(auto b, engine::prompt_logits(tested, tokens, {}, adapter));
    for (size_t t = 0; t < tokens.size(); ++t) {
      log_softmax(a.data() + t * n_vocab, n_vocab, la);
      log_softmax(b.data() + t * n_vocab, n_vocab, lb);
      double d = 0;
      for (int i = 0; i < n_vocab; ++i) d += std::exp(la[i]) * (la[i] - lb[i]);
      out.kl.push_back(std::max(0.0, d));
      out.agree += std::max_element(la.begin(), la.end()) - la.begin() ==
                   std::max_element(lb.begin(), lb.end()) - lb.begin();
    }
  }
  return out;
}

}  // namespace

void add_kld(CLI::App& app, int& exit_code) {
  struct Options {
    std::string model, text_file, kv_type_k = "q8_0", kv_type_v = "q8_0", base = "f16";
    int ctx = 512;
    int chunk = 64;
    bool json = false;
    KernelFlags kernels;
    LoraFlags lora;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "kld",
      "KL divergence of next-token distributions with a quantized KV cache against an f16 one");
  cmd->add_option("-m,--model", o->model, "GGUF model (default: the shipped stories260K)");
  cmd->add_option("-f,--file", o->text_file,
                  "Text to evaluate (default: a built-in English paragraph)");
  cmd->add_option("--kv-type-k", o->kv_type_k, "K cache type under test: f16, q8_0, q4_0")
      ->capture_default_str();
  cmd->add_option("--kv-type-v", o->kv_type_v, "V cache type under test: f16, q8_0, q4_0")
      ->capture_default_str();
  cmd->add_option("--base-kv-type", o->base, "KV cache type of the reference run")
      ->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "Tokens per evaluation window (the text is cut into windows)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the figures as JSON");
  add_kernel_flags(cmd, o->kernels);
  add_lora_flags(cmd, o->lora, /*serving=*/false);
  cmd->callback([o, &exit_code] {
    auto fail = [&](const std::string& message) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = kExitBadInput;
    };
    auto adapters = lora_files(o->lora);
    if (!adapters) return fail(adapters.error().message());
    if (adapters->size() > 1) return fail("kld: give at most one --lora");
    auto type = [&](const std::string& name) { return gguf::tensor_type_from_name(name); };
    const auto k = type(o->kv_type_k), v = type(o->kv_type_v), base = type(o->base);
    if (!k || !v || !base) return fail("kld: KV types must be f32, f16, q8_0 or q4_0");
    std::string text = kDefaultText;
    if (!o->text_file.empty()) {
      std::ifstream in(o->text_file, std::ios::binary);
      if (!in) return fail("kld: cannot read " + o->text_file);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    const std::string path = o->model.empty() ? default_model_path() : o->model;
    auto tok = load_tokenizer(path);
    if (!tok) return fail(tok.error().message());
    const auto ids = tok->encode(text, {.add_bos = true});
    auto load = [&](tensor::DType kt, tensor::DType vt) {
      engine::EngineOptions eo{
          .model_path = path,
          .request = {.n_ctx = o->ctx,
                      .k_type = kt,
                      .v_type = vt,
                      .n_ubatch = o->chunk,
                      .logits_all_positions = true,
                      .n_threads = o->kernels.threads,
                      .reference_kernels = o->kernels.reference()},
          .devices = {.probe = false, .gpu_backend = o->kernels.gpu_backend()}};
      eo.adapters = *adapters;
      return engine::Engine::load(eo);
    };
    auto reference = load(*base, *base);
    if (!reference) return fail(reference.error().message());
    auto tested = load(*k, *v);
    if (!tested) return fail(tested.error().message());

    auto divergence = compare_windows(**reference, **tested, ids, o->ctx,
                                      adapters->empty() ? "" : adapters->front().name);
    if (!divergence) return fail(divergence.error().message());
    const std::vector<double>& kl = divergence->kl;
    const int agree = divergence->agree;
    if (kl.empty())
      return fail("kld: the text has fewer than 2 tokens; give a longer text with -f");
    std::vector<double> sorted = kl;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double d : kl) mean += d / kl.size();
    const double median = sorted[sorted.size() / 2],
                 p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    const double top1 = 100.0 * agree / kl.size();
    if (o->json) {
      std::printf(
          "{\"model\": \"%s\", \"k\": \"%s\", \"v\": \"%s\", \"base\": \"%s\", \"positions\": %zu, "
          "\"kld_mean\": %.6g, \"kld_median\": %.6g, \"kld_p99\": %.6g, \"kld_max\": %.6g, "
          "\"top1_agreement\": %.2f}\n",
          path.c_str(), o->kv_type_k.c_str(), o->kv_type_v.c_str(), o->base.c_str(), kl.size(),
          mean, median, p99, sorted.back(), top1);
    } else {
      std::printf(
          "KV K %s / V %s against %s, %zu positions of %s:\n  KL divergence mean %.6f, median "
          "%.6f, p99 "
          "%.6f, max %.6f nats; top-1 token agreement %.2f%%\n",
          o->kv_type_k.c_str(), o->kv_type_v.c_str(), o->base.c_str(), kl.size(), path.c_str(),
          mean, median, p99, sorted.back(), top1);
    }
    exit_code = kExitOk;
  });
}

}  // namespace cli
