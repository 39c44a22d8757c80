// The engine asks for 2 MiB pages (util::MappedFile::advise_huge_pages) in the mappings of the
// weights the CPU streams — the model's and a draft model's — and not where a GPU holds them: read
// back from the kernel's record of this process's mappings (/proc/self/smaps).
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "testing/emulated_gpu.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;

bool any_hinted(const std::string& path) {
  for (const auto& m : testing_util::mappings_of(path)) {
    if (m.huge_page_hint) return true;
  }
  return false;
}

TEST(EngineHugePages, TheWeightsTheCpuStreamsAreHintedAndThoseOnAGpuAreNot) {
  if (!testing_util::has_transparent_huge_pages())
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  // Two copies, so that the model's mapping and the draft model's are told apart by name.
  const fs::path stories = testing_util::shared_dir() / "models/stories260K.gguf";
  const fs::path dir = testing_util::temp_dir();
  const std::string model = (dir / "model.gguf").string(),
                    drafter = (dir / "drafter.gguf").string();
  fs::copy_file(stories, model, fs::copy_options::overwrite_existing);
  fs::copy_file(stories, drafter, fs::copy_options::overwrite_existing);
  const plan::Request request{.n_ctx = 128, .n_ubatch = 16, .n_draft = 2};
  {
    auto e = engine::Engine::load(
        {.model_path = model, .draft_model_path = drafter, .request = request});
    ASSERT_TRUE(e.ok()) << e.error().message();
    ASSERT_NE((*e)->draft_model(), nullptr);
    ASSERT_FALSE(testing_util::mappings_of(model).empty());
    EXPECT_TRUE(any_hinted(model));
    EXPECT_TRUE(any_hinted(drafter));
  }
  {
    engine::EngineOptions o{.model_path = model, .draft_model_path = drafter, .request = request};
    o.devices.assume_gpu = "1G@100";
    o.gpu_backend = [](int) -> util::Result<std::unique_ptr<kernels::Backend>> {
      return std::unique_ptr<kernels::Backend>(
          std::make_unique<testing_util::EmulatedGpu>(2, 16, 4096));
    };
    auto e = engine::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message();
    ASSERT_TRUE((*e)->plan().uses_gpu());
    ASSERT_FALSE(testing_util::mappings_of(model).empty());
    EXPECT_FALSE(any_hinted(model));
    EXPECT_FALSE(any_hinted(drafter));
  }
}

}  // namespace
