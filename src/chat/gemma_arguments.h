// Gemma 4's tool-call argument syntax read as JSON, one byte at a time.
//
// Gemma 4 writes a call's arguments as an object with bare keys and strings between <|"|>
// delimiters, unescaped: {city:<|"|>Paris<|"|>,days:2,tags:[<|"|>a<|"|>]} (spec §5.4). The reader
// turns that into JSON text as the bytes arrive, {"city":"Paris","days":2,"tags":["a"]}, so a
// streaming parser can forward argument deltas and a constraint can check them with the JSON
// grammar. Numbers, true, false and null pass through as they are (the JSON reader or grammar
// downstream judges them); keys may also be written between delimiters.
#pragma once

#include <string>
#include <string_view>

namespace chat {

inline constexpr std::string_view kGemmaStringDelimiter = "<|\"|>";

// Appends `bytes` as the inside of a JSON string: " and \ escaped, control characters as \n,
// \t, \r, \b, \f or \u00XX; everything else (UTF-8 included) as it is.
void append_json_escaped(std::string& out, std::string_view bytes);

class GemmaArgumentReader {
 public:
  // `allow_space`: whitespace between tokens passes through as JSON whitespace. Gemma 4 never
  // writes any, so a constraint turns it off (and spends no tokens on it); a parser reading what
  // a model wrote keeps it on.
  explicit GemmaArgumentReader(bool allow_space = true) : allow_space_(allow_space) {}

  // Reads the next byte of the arguments (starting at their opening '{'), appending the JSON it
  // stands for to `out`. Returns false at the first byte the syntax does not allow; the reader
  // then stays failed. Bytes that may begin a closing delimiter inside a string are held until
  // the delimiter completes or the string goes on.
  bool push(char byte, std::string& out);
  bool failed() const { return mode_ == kFailed; }
  // The object has closed: the arguments are whole.
  bool complete() const { return mode_ == kDone; }
  // The bytes held inside a string that may be the start of its closing delimiter ("<", "<|", …).
  std::string_view held() const { return held_; }
  // Inside a string value with nothing held: a byte other than '<' goes out as itself (escaped).
  bool in_plain_string() const { return mode_ == kString && held_.empty(); }

 private:
  enum Mode : unsigned char {
    kValue,       // a value is expected
    kScalar,      // inside a bare number or literal
    kAfterValue,  // ',' or a closing bracket is expected
    kKey,         // a key or '}' is expected
    kBareKey,     // inside a key written without delimiters
    kColon,       // ':' after a delimited key
    kOpening,     // inside an opening delimiter
    kString,      // inside a delimited string value
    kQuotedKey,   // inside a delimited key
    kDone,
    kFailed,
  };
  bool fail() {
    mode_ = kFailed;
    return false;
  }
  bool value_byte(char byte, std::string& out);
  bool after_value_byte(char byte, std::string& out);
  bool key_byte(char byte, std::string& out);
  bool string_byte(char byte, std::string& out);
  void close_container(char byte, std::string& out);

  bool allow_space_;
  Mode mode_ = kValue;
  Mode after_opening_ = kString;  // kString or kQuotedKey
  bool first_ = true;             // no member or element yet in the innermost container
  std::string nesting_;           // '{' and '[' of the open containers, innermost last
  std::string held_;              // see held()
  size_t matched_ = 0;            // bytes of an opening delimiter seen
};

}  // namespace chat
