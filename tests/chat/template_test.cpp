// The public API: apply_chat_template's variables, built-in formats, Gemma 4 thinking on/off.
#include "chat/template.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "chat_testing.h"
#include "testing/testing.h"

namespace {

using nlohmann::ordered_json;

ordered_json hello() {
  return ordered_json::parse(R"([{"role": "user", "content": "Hello"}])");
}

std::string apply(std::string_view source, const ordered_json& messages,
                  const chat::RenderOptions& options) {
  auto out = chat::apply_chat_template(source, messages, options);
  return out ? *out : "ERROR: " + out.error().message();
}

TEST(ChatBuiltins, Gemma4IsTheReferenceTemplateVerbatim) {
  auto text = chat::builtin_template("gemma4");
  ASSERT_TRUE(text);
  EXPECT_EQ(std::string(*text),
            testing_util::read_text(testing_util::shared_dir() /
                                    "testdata/templates/google-gemma-4-31B-it.jinja"));
}

TEST(ChatBuiltins, Gemma4ThinkingOffAddsAnEmptyThoughtChannel) {
  // gemma4.md §5.4: no system turn; the generation prompt closes an empty thought channel.
  chat::RenderOptions options;
  options.bos_token = "<bos>";
  options.extra = {{"enable_thinking", false}};
  EXPECT_EQ(apply(*chat::builtin_template("gemma4"), hello(), options),
            "<bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  options.extra = ordered_json::object();  // not passing enable_thinking also means off
  EXPECT_EQ(apply(*chat::builtin_template("gemma4"), hello(), options),
            "<bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

TEST(ChatBuiltins, Gemma4ThinkingOnOpensASystemTurnWithTheThinkToken) {
  chat::RenderOptions options;
  options.bos_token = "<bos>";
  options.extra = {{"enable_thinking", true}};
  EXPECT_EQ(apply(*chat::builtin_template("gemma4"), hello(), options),
            "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello<turn|>\n<|turn>model\n");
  auto with_system = ordered_json::parse(
      R"([{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": "Hi"}])");
  EXPECT_EQ(apply(*chat::builtin_template("gemma4"), with_system, options),
            "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n"
            "<|turn>model\n");
}

TEST(ChatBuiltins, Gemma4StripsEarlierReasoningAndRendersToolCalls) {
  auto messages = ordered_json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "a1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}}]},
    {"role": "tool", "tool_call_id": "a1", "name": "get_weather", "content": "rain"},
    {"role": "assistant", "content": "<|channel>thought\nhidden<channel|>It rains."},
    {"role": "user", "content": "Thanks"}])");
  chat::RenderOptions options;
  options.bos_token = "<bos>";
  EXPECT_EQ(apply(*chat::builtin_template("gemma4"), messages, options),
            "<bos><|turn>user\nWeather?<turn|>\n<|turn>model\n"
            "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:2}<tool_call|>"
            "<|tool_response>response:get_weather{value:<|\"|>rain<|\"|>}<tool_response|>"
            "It rains.<turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n"
            "<|channel>thought\n<channel|>");
}

TEST(ChatBuiltins, ChatmlAndLlama3) {
  chat::RenderOptions options;
  options.bos_token = "<|begin_of_text|>";
  EXPECT_EQ(apply(*chat::builtin_template("chatml"), hello(), options),
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply(*chat::builtin_template("llama3"), hello(), options),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  options.add_generation_prompt = false;
  EXPECT_EQ(apply(*chat::builtin_template("chatml"), hello(), options),
            "<|im_start|>user\nHello<|im_end|>\n");
  auto unknown = chat::builtin_template("vicuna");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message(),
            "chat template: no built-in template named 'vicuna' — use gemma4, chatml or llama3, "
            "or pass a template FILE");
}

// An agent turn as the server hands it to a template: arguments parsed into an object.
ordered_json agent_turns() {
  return ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "tool_call_id": "c0", "content": "rain"}])");
}

ordered_json weather_tool() {
  return ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}}}])");
}

TEST(ChatBuiltins, ChatmlDeclaresToolsAsHermesDoes) {
  // Truth: the Hermes / Qwen 2.5 layout (testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja)
  // without Qwen's default system prompt.
  chat::RenderOptions options;
  options.tools = weather_tool();
  EXPECT_EQ(apply(*chat::builtin_template("chatml"), agent_turns(), options),
            "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with "
            "the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
            "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
            "\"Weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
            "\"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json "
            "object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
            "\"Oslo\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nrain\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatBuiltins, Llama3DeclaresToolsAsLlama31Does) {
  // Truth: Llama 3.1's layout with the tools in the system turn (its tools_in_user_message=false
  // path), calls as {"name", "parameters"} and results in an ipython turn.
  chat::RenderOptions options;
  options.bos_token = "<|begin_of_text|>";
  options.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(apply(*chat::builtin_template("llama3"), agent_turns(), options),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n\nYou have "
            "access to the following functions. To call a function, please respond with JSON for a function "
            "call. Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name "
            "and its value}. Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n"
            "        \"name\": \"f\"\n    }\n}\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWeather in Oslo?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
            "{\"city\": \"Oslo\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\nrain<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatBuiltins, Gemma4DeclaresToolsNatively) {
  chat::RenderOptions options;
  options.bos_token = "<bos>";
  options.tools = weather_tool();
  EXPECT_EQ(apply(*chat::builtin_template("gemma4"), agent_turns(), options),
            "<bos><|turn>system\nBe brief.<|tool>declaration:get_weather{description:<|\"|>Weather<|\"|>,"
            "parameters:{properties:{city:{type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],"
            "type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n<|turn>user\nWeather in Oslo?<turn|>\n<|turn>model\n"
            "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>"
            "<|tool_response>response:get_weather{value:<|\"|>rain<|\"|>}<tool_response|>");
}

TEST(ChatApply, PassesHuggingFacesVariables) {
  chat::RenderOptions options;
  options.bos_token = "B";
  options.eos_token = "E";
  const char* probe =
      "{{ bos_token }}{{ eos_token }}|{{ tools is defined }}{{ tools is none }}|"
      "{{ documents is defined }}{{ documents is none }}|{{ add_generation_prompt }}|"
      "{{ enable_thinking is defined }}|{{ messages|length }}";
  EXPECT_EQ(apply(probe, hello(), options), "BE|TrueTrue|TrueTrue|True|False|1");
  options.extra = {{"enable_thinking", true}, {"bos_token", "X"}};  // extra overrides
  options.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(
      apply("{{ bos_token }}{{ enable_thinking }}{{ tools[0].function.name }}", hello(), options),
      "XTruef");
}

TEST(ChatApply, RejectsBadInputWithOneLineErrors) {
  chat::RenderOptions options;
  EXPECT_EQ(apply("x", ordered_json::object(), options),
            "ERROR: chat template: messages must be a JSON array");
  EXPECT_EQ(apply("ok \xff bad", hello(), options),
            "ERROR: chat template: byte 3 is not valid UTF-8 — save the template as UTF-8");
  auto tmpl = chat::Template::parse("{{ x }}");
  ASSERT_TRUE(tmpl);
  auto out = tmpl->render(ordered_json::array());
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().message(), "chat template: the variables must be a JSON object");
}

TEST(ChatApply, TemplateParsesOnceAndRendersManyTimes) {
  auto tmpl = chat::Template::parse("{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(tmpl);
  chat::Template copy = *tmpl;  // cheap to copy: the parsed program is shared
  for (int i = 0; i < 3; ++i) {
    auto out = copy.render({{"messages", hello()}});
    ASSERT_TRUE(out);
    EXPECT_EQ(*out, "Hello");
  }
}

TEST(ChatApply, OneTemplateRendersConcurrently) {
  // A parsed Template is immutable: server threads share one and render in parallel.
  auto tmpl = chat::Template::parse(*chat::builtin_template("gemma4"));
  ASSERT_TRUE(tmpl);
  ordered_json vars = {
      {"messages", hello()}, {"bos_token", "<bos>"}, {"add_generation_prompt", true}};
  std::string want = *tmpl->render(vars);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto out = tmpl->render(vars);
        if (out && *out == want) ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 200);
}

}  // namespace
