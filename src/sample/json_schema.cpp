// JSON Schema → Grammar: a fail-closed subset. Every keyword is either enforced exactly, a pure
// annotation, or refused with its name and path.
#include "sample/json_schema.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

namespace sample {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "$schema", "$id", "$comment", "examples", "default",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
const std::set<std::string, std::less<>> kObjectKeywords = {"properties", "required", "additionalProperties"};
const std::set<std::string, std::less<>> kArrayKeywords = {"items", "minItems", "maxItems"};
const std::set<std::string, std::less<>> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string, std::less<>> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string, std::less<>> kCombinators = {"anyOf", "oneOf", "allOf", "enum", "const", "$ref", "type"};

// RFC 3339 shapes that every validator accepts: no leap seconds, no 29 February, year ≥ 1.
constexpr std::string_view kDatePattern =
    "([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-"
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
constexpr std::string_view kTimePattern =
    "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", std::string(kDatePattern)},
    {"time", std::string(kTimePattern)},
    {"date-time", std::string(kDatePattern) + "T" + std::string(kTimePattern)},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"email", "[A-Za-z0-9_+-]+(\\.[A-Za-z0-9_+-]+)*@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+"},
};

std::string show(const std::string& path) {
  return path.empty() ? "/" : path;
}

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

util::Error unsupported(std::string_view feature, const std::string& path) {
  return util::errorf("schema feature '{}' at {} is not supported", feature, show(path));
}
util::Error invalid(std::string_view what, const std::string& path) {
  return util::errorf("invalid schema at {}: {}", show(path), what);
}

bool json_has_type(const Json& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    return v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>();
  }
  return false;
}

enum Kinds : unsigned { kKObject = 1, kKArray = 2, kKString = 4, kKNumber = 8, kKTrue = 16, kKFalse = 32, kKNull = 64, kKAll = 127 };

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {}

  util::Result<Grammar> run() {
    HR_ASSIGN_OR_RETURN(g_.root, compile(root_, ""));
    HR_TRY(g_.finalize());
    return std::move(g_);
  }

  int32_t any() {
    if (any_ >= 0) return any_;
    any_ = add(GrammarNode::kAlt);
    const int32_t object = add(GrammarNode::kObject);
    g_.nodes[object].additional = any_;
    g_.nodes[object].additional_key = add(GrammarNode::kString);
    const int32_t array = add(GrammarNode::kArray);
    g_.nodes[array].items = any_;
    const int32_t string = add(GrammarNode::kString);
    const int32_t number = add(GrammarNode::kNumber);
    const int32_t literals = add(GrammarNode::kLiteral);
    g_.nodes[literals].literals.add("true", 0);
    g_.nodes[literals].literals.add("false", 1);
    g_.nodes[literals].literals.add("null", 2);
    g_.nodes[any_].alternatives = {object, array, string, number, literals};
    return any_;
  }

  Grammar take_any_object() {
    const int32_t object = add(GrammarNode::kObject);
    g_.nodes[object].additional = any();
    g_.nodes[object].additional_key = add(GrammarNode::kString);
    g_.root = object;
    [[maybe_unused]] const util::Status status = g_.finalize();  // no refs: cannot fail
    assert(status.ok());
    return std::move(g_);
  }

 private:
  int32_t add(GrammarNode::Kind kind) {
    g_.nodes.emplace_back();
    g_.nodes.back().kind = kind;
    return static_cast<int32_t>(g_.nodes.size()) - 1;
  }

  // Keywords other than annotations and `allowed`.
  static util::Status only(const Json& s, const std::string& path, std::initializer_list<std::string_view> allowed,
                           std::string_view context) {
    for (const auto& [key, value] : s.items()) {
      if (kAnnotations.count(key)) continue;
      bool ok = false;
      for (auto a : allowed) ok = ok || key == a;
      if (!ok) return unsupported(fmt::format("{}' together with '{}", key, context), path);
    }
    return {};
  }

  util::Result<int32_t> compile(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return any();
      return unsupported("false schema", path);
    }
    if (!s.is_object()) return invalid("a schema must be an object or a boolean", path);
    for (const auto& [key, value] : s.items()) {
      if (kAnnotations.count(key) || kCombinators.count(key) || kObjectKeywords.count(key) ||
          kArrayKeywords.count(key) || kStringKeywords.count(key) || kNumberKeywords.count(key))
        continue;
      return unsupported(key, path);
    }
    if (s.contains("$ref")) {
      HR_TRY(only(s, path, {"$ref"}, "$ref"));
      return compile_ref(s["$ref"], path + "/$ref");
    }
    if (s.contains("allOf")) {
      HR_TRY(only(s, path, {"allOf"}, "allOf"));
      const Json& all = s["allOf"];
      if (!all.is_array() || all.empty()) return invalid("allOf must be a non-empty array", path);
      if (all.size() != 1) return unsupported("allOf with more than one schema", path);
      return compile(all[0], path + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      HR_TRY(only(s, path, {key}, key));
      const Json& branches = s[key];
      if (!branches.is_array() || branches.empty()) return invalid(fmt::format("{} must be a non-empty array", key), path);
      const int32_t alt = add(GrammarNode::kAlt);
      std::vector<int32_t> ids;
      for (size_t i = 0; i < branches.size(); ++i) {
        HR_ASSIGN_OR_RETURN(int32_t id, compile(branches[i], fmt::format("{}/{}/{}", path, key, i)));
        ids.push_back(id);
      }
      if (std::string_view(key) == "oneOf") HR_TRY(check_exclusive(ids, path));
      g_.nodes[alt].alternatives = ids;
      return alt;
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) return invalid("type must be a string or an array of strings", path);
          types.push_back(x.get<std::string>());
        }
      } else {
        return invalid("type must be a string or an array of strings", path);
      }
      for (const auto& name : types) {
        if (name != "object" && name != "array" && name != "string" && name != "number" && name != "integer" &&
            name != "boolean" && name != "null")
          return invalid(fmt::format("unknown type '{}'", name), path);
      }
    }

    if (s.contains("enum") || s.contains("const")) {
      HR_TRY(only(s, path, {"enum", "const", "type"}, s.contains("enum") ? "enum" : "const"));
      if (s.contains("enum") && s.contains("const")) return unsupported("enum' together with 'const", path);
      std::vector<Json> values;
      if (s.contains("const")) {
        values.push_back(s["const"]);
      } else {
        if (!s["enum"].is_array()) return invalid("enum must be an array", path);
        values.assign(s["enum"].begin(), s["enum"].end());
      }
      const int32_t id = add(GrammarNode::kLiteral);
      int32_t index = 0;
      std::set<std::string> seen;
      for (const auto& v : values) {
        bool typed = types.empty();
        for (const auto& t : types) typed = typed || json_has_type(v, t);
        if (!typed) continue;
        std::string text;
        try {
          text = v.dump();
        } catch (const nlohmann::json::exception&) {
          return invalid("an enum value is not valid UTF-8", path);
        }
        if (seen.insert(text).second) g_.nodes[id].literals.add(text, index++);
      }
      if (index == 0) return invalid("enum/const has no value of the allowed type", path);
      return id;
    }

    if (types.empty()) {
      // No type: the keywords present say which type is meant; mixing families is refused.
      auto family = [&](const auto& keywords, const char* type) {
        for (const auto& [key, value] : s.items()) {
          if (keywords.count(key)) {
            types.push_back(type);
            return;
          }
        }
      };
      family(kObjectKeywords, "object");
      family(kArrayKeywords, "array");
      family(kStringKeywords, "string");
      family(kNumberKeywords, "number");
      if (types.empty()) return any();
      if (types.size() > 1) return unsupported("keywords of several types without 'type'", path);
    }

    std::vector<int32_t> ids;
    for (const auto& t : types) {
      HR_ASSIGN_OR_RETURN(int32_t id, compile_typed(s, t, path));
      ids.push_back(id);
    }
    if (ids.size() == 1) return ids[0];
    const int32_t alt = add(GrammarNode::kAlt);
    g_.nodes[alt].alternatives = ids;
    return alt;
  }

  util::Result<int32_t> compile_ref(const Json& ref, const std::string& path) {
    if (!ref.is_string()) return invalid("$ref must be a string", path);
    const auto target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') return unsupported(fmt::format("$ref to '{}' (only local #/... refs)", target), path);
    const Json* node = &root_;
    try {
      const Json::json_pointer pointer(target.substr(1));
      if (!root_.contains(pointer)) return invalid(fmt::format("$ref '{}' points to nothing", target), path);
      node = &root_.at(pointer);
    } catch (const nlohmann::json::exception&) {
      return invalid(fmt::format("$ref '{}' is not a valid JSON pointer", target), path);
    }
    // A placeholder alternative first, so that recursive refs find it.
    const int32_t id = add(GrammarNode::kAlt);
    refs_[target] = id;
    HR_ASSIGN_OR_RETURN(int32_t body, compile(*node, target.substr(1)));
    g_.nodes[id].alternatives = {body};
    return id;
  }

  util::Result<int32_t> compile_typed(const Json& s, const std::string& type, const std::string& path) {
    if (type == "null" || type == "boolean") {
      const int32_t id = add(GrammarNode::kLiteral);
      if (type == "null") {
        g_.nodes[id].literals.add("null", 0);
      } else {
        g_.nodes[id].literals.add("true", 0);
        g_.nodes[id].literals.add("false", 1);
      }
      return id;
    }
    if (type == "number" || type == "integer") return compile_number(s, type == "integer", path);
    if (type == "string") return compile_string(s, path);
    if (type == "array") return compile_array(s, path);
    return compile_object(s, path);
  }

  static util::Result<int64_t> count(const Json& s, const char* key, int64_t fallback, const std::string& path) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() && !(v.is_number_float() && json_has_type(v, "integer")))
      return invalid(fmt::format("{} must be a non-negative integer", key), path);
    const double d = v.get<double>();
    if (d < 0 || d > 1e9) return invalid(fmt::format("{} must be a non-negative integer below 10^9", key), path);
    return static_cast<int64_t>(d);
  }

  util::Result<int32_t> compile_number(const Json& s, bool integer, const std::string& path) {
    GrammarNode n;
    n.kind = GrammarNode::kNumber;
    n.integer = integer;
    for (const auto& key : kNumberKeywords) {
      if (!s.contains(key)) continue;
      if (!integer) return unsupported(fmt::format("{}' on type 'number", key), path);
      const Json& v = s[key];
      if (!v.is_number()) return invalid(fmt::format("{} must be a number", key), path);
      const double d = v.get<double>();
      if (!(std::fabs(d) < 1e18)) return unsupported(fmt::format("{} beyond ±10^18", key), path);
      int64_t bound;
      if (key == "minimum") bound = static_cast<int64_t>(std::ceil(d));
      else if (key == "exclusiveMinimum") bound = static_cast<int64_t>(std::floor(d)) + 1;
      else if (key == "maximum") bound = static_cast<int64_t>(std::floor(d));
      else bound = static_cast<int64_t>(std::ceil(d)) - 1;
      if (key == "minimum" || key == "exclusiveMinimum") {
        n.min = n.has_min ? std::max(n.min, bound) : bound;
        n.has_min = true;
      } else {
        n.max = n.has_max ? std::min(n.max, bound) : bound;
        n.has_max = true;
      }
    }
    if (n.has_min && n.has_max && n.min > n.max) return invalid("no integer lies within minimum and maximum", path);
    g_.nodes.push_back(std::move(n));
    return static_cast<int32_t>(g_.nodes.size()) - 1;
  }

  util::Result<int32_t> compile_string(const Json& s, const std::string& path) {
    GrammarNode n;
    n.kind = GrammarNode::kString;
    HR_ASSIGN_OR_RETURN(n.min_length, count(s, "minLength", 0, path));
    HR_ASSIGN_OR_RETURN(n.max_length, count(s, "maxLength", -1, path));
    if (n.max_length >= 0 && n.min_length > n.max_length) return invalid("minLength is above maxLength", path);
    std::string pattern;
    if (s.contains("pattern") && s.contains("format")) return unsupported("pattern' together with 'format", path);
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return invalid("pattern must be a string", path);
      pattern = s["pattern"].get<std::string>();
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) return invalid("format must be a string", path);
      const auto format = s["format"].get<std::string>();
      auto it = kFormats.find(format);
      if (it == kFormats.end()) return unsupported(fmt::format("format '{}'", format), path);
      pattern = "^(" + it->second + ")$";
    }
    if (s.contains("pattern") || s.contains("format")) {
      if (s.contains("minLength") || s.contains("maxLength"))
        return unsupported(fmt::format("minLength/maxLength' together with '{}", s.contains("pattern") ? "pattern" : "format"), path);
      auto re = Regex::compile(pattern, /*search=*/true);
      if (!re) return util::errorf("schema pattern at {}: {}", show(path), re.error().message());
      g_.regexes.push_back(std::move(*re));
      n.regex = static_cast<int32_t>(g_.regexes.size()) - 1;
      n.allow_escapes = false;
    }
    g_.nodes.push_back(std::move(n));
    return static_cast<int32_t>(g_.nodes.size()) - 1;
  }

  util::Result<int32_t> compile_array(const Json& s, const std::string& path) {
    const int32_t id = add(GrammarNode::kArray);
    HR_ASSIGN_OR_RETURN(int64_t min_items, count(s, "minItems", 0, path));
    HR_ASSIGN_OR_RETURN(int64_t max_items, count(s, "maxItems", -1, path));
    if (max_items >= 0 && min_items > max_items) return invalid("minItems is above maxItems", path);
    int32_t items;
    if (s.contains("items")) {
      if (s["items"].is_array()) return unsupported("items as an array (tuple validation)", path);
      HR_ASSIGN_OR_RETURN(items, compile(s["items"], path + "/items"));
    } else {
      items = any();
    }
    g_.nodes[id].items = items;
    g_.nodes[id].min_items = min_items;
    g_.nodes[id].max_items = max_items;
    return id;
  }

  util::Result<int32_t> compile_object(const Json& s, const std::string& path) {
    const int32_t id = add(GrammarNode::kObject);
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return invalid("required must be an array of strings", path);
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return invalid("required must be an array of strings", path);
        required.insert(r.get<std::string>());
      }
    }
    const bool has_properties = s.contains("properties");
    if (has_properties) {
      const Json& props = s["properties"];
      if (!props.is_object()) return invalid("properties must be an object", path);
      for (const auto& [name, schema] : props.items()) {
        const std::string child_path = path + "/properties/" + escape_pointer(name);
        HR_ASSIGN_OR_RETURN(int32_t value, compile(schema, child_path));
        std::string key;
        try {
          key = Json(name).dump();
        } catch (const nlohmann::json::exception&) {
          return invalid("a property name is not valid UTF-8", path);
        }
        auto& node = g_.nodes[id];
        node.keys.add(key, static_cast<int32_t>(node.properties.size()));
        node.properties.push_back({key, value, required.count(name) > 0});
      }
    }
    for (const auto& r : required) {
      bool listed = false;
      for (const auto& p : g_.nodes[id].properties) listed = listed || p.key == Json(r).dump();
      if (!listed) return unsupported(fmt::format("required property '{}' not listed in properties", r), path);
    }
    // additionalProperties absent: none when properties are listed (as llama.cpp and XGrammar's
    // strict mode do), any when the schema lists none ({"type":"object"}).
    int32_t additional = -1;
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) {
        HR_ASSIGN_OR_RETURN(additional, compile(a, path + "/additionalProperties"));
      }
    } else if (!has_properties) {
      additional = any();
    }
    if (additional >= 0) {
      const int32_t key = add(GrammarNode::kString);
      g_.nodes[key].allow_escapes = false;
      if (!g_.nodes[id].properties.empty()) g_.nodes[key].exclude_keys = id;
      g_.nodes[id].additional = additional;
      g_.nodes[id].additional_key = key;
    }
    return id;
  }

  // The JSON kinds (by first byte) a node can start with; literals by their values.
  unsigned kinds(int32_t id, std::set<int32_t>& visiting) {
    const GrammarNode& n = g_.nodes[id];
    switch (n.kind) {
      case GrammarNode::kAlt: {
        if (!visiting.insert(id).second || n.alternatives.empty()) return kKAll;  // recursive ref
        unsigned k = 0;
        for (int32_t a : n.alternatives) k |= kinds(a, visiting);
        return k;
      }
      case GrammarNode::kLiteral: {
        unsigned k = 0;
        for (const auto& [byte, child] : n.literals.nodes[0].children) {
          k |= byte == '{' ? kKObject : byte == '[' ? kKArray : byte == '"' ? kKString : byte == 't' ? kKTrue
             : byte == 'f' ? kKFalse : byte == 'n' ? kKNull : kKNumber;
        }
        return k;
      }
      case GrammarNode::kString: return kKString;
      case GrammarNode::kNumber: return kKNumber;
      case GrammarNode::kObject: return kKObject;
      case GrammarNode::kArray: return kKArray;
    }
    return kKAll;
  }

  // oneOf is enforced as anyOf, which is only exact when no value matches two branches: branches
  // must start with different JSON kinds, or all be literal sets with no value in common.
  util::Status check_exclusive(const std::vector<int32_t>& ids, const std::string& path) {
    bool all_literal = true;
    for (int32_t id : ids) all_literal = all_literal && g_.nodes[id].kind == GrammarNode::kLiteral;
    if (all_literal) {
      std::set<std::string> seen;
      for (int32_t id : ids) {
        std::set<std::string> mine;
        collect_literals(g_.nodes[id].literals, 0, "", mine);
        for (const auto& v : mine) {
          if (!seen.insert(v).second) return unsupported("oneOf with branches that share a value", path);
        }
      }
      return {};
    }
    unsigned seen = 0;
    for (int32_t id : ids) {
      std::set<int32_t> visiting;
      const unsigned k = kinds(id, visiting);
      if (k & seen) return unsupported("oneOf with branches that may match the same value (use anyOf)", path);
      seen |= k;
    }
    return {};
  }

  static void collect_literals(const LiteralTrie& t, int32_t node, const std::string& prefix, std::set<std::string>& out) {
    if (t.nodes[node].terminal >= 0) out.insert(prefix);
    for (const auto& [byte, child] : t.nodes[node].children) {
      collect_literals(t, child, prefix + static_cast<char>(byte), out);
    }
  }

  const Json& root_;
  Grammar g_;
  int32_t any_ = -1;
  std::map<std::string, int32_t> refs_;
};

}  // namespace

util::Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema) {
  return Compiler(schema).run();
}

Grammar any_json_object_grammar() {
  static const Json empty = Json::object();
  return Compiler(empty).take_any_object();
}

}  // namespace sample
