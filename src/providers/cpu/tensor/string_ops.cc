// String kernels: StringConcat, StringSplit, StringNormalizer, RegexFullMatch.
#include <algorithm>
#include <clocale>
#include <cstdint>
#include <cwctype>
#include <locale.h>
#include <wctype.h>
#include <regex>
#include <string>
#include <unordered_set>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

void require_strings(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kString) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input '") + what + "' must be a string tensor, got " + dtype_name(t.dtype()));
  }
}

// ---------------------------------------------------------------------------------------
// StringConcat: z = x + y elementwise, with numpy broadcasting.

class StringConcat final : public Kernel {
 public:
  explicit StringConcat(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& y = ctx.required_input(1);
    require_strings(ctx, x, "X");
    require_strings(ctx, y, "Y");
    Shape out;
    try {
      out = broadcast_shapes(x.shape(), y.shape(), "inputs 'X' and 'Y'");
    } catch (const Error& e) {
      ctx.fail(StatusCode::kInvalidArgument, e.what());
    }
    Tensor& z = ctx.allocate_output(0, DataType::kString, out);
    const std::vector<int64_t> xs = broadcast_strides(x.shape(), out);
    const std::vector<int64_t> ys = broadcast_strides(y.shape(), out);
    const std::string* px = x.data<std::string>();
    const std::string* py = y.data<std::string>();
    std::string* pz = z.data<std::string>();
    const int64_t n = z.numel();
    std::vector<int64_t> idx(out.size(), 0);
    int64_t ox = 0, oy = 0;
    for (int64_t i = 0; i < n; ++i) {
      pz[i].reserve(px[ox].size() + py[oy].size());
      pz[i] = px[ox];
      pz[i] += py[oy];
      for (size_t d = out.size(); d-- > 0;) {
        ox += xs[d];
        oy += ys[d];
        if (++idx[d] < out[d]) break;
        ox -= xs[d] * out[d];
        oy -= ys[d] * out[d];
        idx[d] = 0;
      }
    }
  }
};

// ---------------------------------------------------------------------------------------
// StringSplit: Y = X's elements split into substrings (padded with "" to the longest
// split), Z = the number of substrings of each element. The splitting is Python's
// str.split(delimiter or None, maxsplit), as in onnx's reference implementation.

// Length in bytes of the whitespace character at s[i] (Python's str.isspace set, in
// UTF-8), or 0.
size_t space_at(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  const size_t left = s.size() - i;
  if (c == 0xc2 && left >= 2 && (b(i + 1) == 0x85 || b(i + 1) == 0xa0)) return 2;
  if (left < 3) return 0;
  const unsigned char c1 = b(i + 1), c2 = b(i + 2);
  if (c == 0xe1 && c1 == 0x9a && c2 == 0x80) return 3;  // U+1680
  if (c == 0xe2 && c1 == 0x80 && (c2 <= 0x8a || c2 == 0xa8 || c2 == 0xa9 || c2 == 0xaf) &&
      c2 >= 0x80)
    return 3;                                           // U+2000..200A, 2028, 2029, 202F
  if (c == 0xe2 && c1 == 0x81 && c2 == 0x9f) return 3;  // U+205F
  if (c == 0xe3 && c1 == 0x80 && c2 == 0x80) return 3;  // U+3000
  return 0;
}

void split_whitespace(const std::string& s, int64_t maxsplit, std::vector<std::string>& parts) {
  size_t i = 0;
  const size_t n = s.size();
  int64_t count = 0;
  while (maxsplit < 0 || count < maxsplit) {
    while (i < n) {
      const size_t w = space_at(s, i);
      if (w == 0) break;
      i += w;
    }
    if (i == n) return;
    const size_t j = i;
    while (i < n && space_at(s, i) == 0) ++i;
    parts.emplace_back(s, j, i - j);
    ++count;
  }
  while (i < n) {
    const size_t w = space_at(s, i);
    if (w == 0) break;
    i += w;
  }
  if (i < n) parts.emplace_back(s, i, n - i);
}

void split_delimiter(const std::string& s, const std::string& sep, int64_t maxsplit,
                     std::vector<std::string>& parts) {
  size_t i = 0;
  int64_t count = 0;
  while (maxsplit < 0 || count < maxsplit) {
    const size_t pos = s.find(sep, i);
    if (pos == std::string::npos) break;
    parts.emplace_back(s, i, pos - i);
    i = pos + sep.size();
    ++count;
  }
  parts.emplace_back(s, i, std::string::npos);
}

class StringSplit final : public Kernel {
 public:
  explicit StringSplit(const KernelInfo& info)
      : delimiter_(info.attr_string("delimiter", "")),
        maxsplit_(info.has_attr("maxsplit") ? info.attr_int("maxsplit", -1) : -1) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    require_strings(ctx, x, "X");
    const int64_t n = x.numel();
    const std::string* px = x.data<std::string>();
    std::vector<std::vector<std::string>> parts(static_cast<size_t>(n));
    int64_t width = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (delimiter_.empty()) {
        split_whitespace(px[i], maxsplit_, parts[i]);
      } else {
        split_delimiter(px[i], delimiter_, maxsplit_, parts[i]);
      }
      width = std::max<int64_t>(width, static_cast<int64_t>(parts[i].size()));
    }
    Shape ys = x.shape();
    ys.push_back(width);
    Tensor& y = ctx.allocate_output(0, DataType::kString, ys);
    Tensor& z = ctx.allocate_output(1, DataType::kInt64, x.shape());
    std::string* py = y.data<std::string>();
    int64_t* pz = z.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      pz[i] = static_cast<int64_t>(parts[i].size());
      for (size_t k = 0; k < parts[i].size(); ++k) py[i * width + k] = std::move(parts[i][k]);
    }
  }

 private:
  std::string delimiter_;
  int64_t maxsplit_;  // < 0: no limit
};

// ---------------------------------------------------------------------------------------
// StringNormalizer: drops the elements of a [C] or [1, C] string tensor that are stop
// words, then lower- or upper-cases the rest (Unicode simple case mapping of the locale).

// Decodes UTF-8 into code points (Str: std::u32string or a 32-bit std::wstring). A
// malformed sequence makes it return false, or, when `replace`, decodes as one U+FFFD per
// offending byte.
template <typename Str>
bool utf8_decode(const std::string& s, Str& out, bool replace = false) {
  out.clear();
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    size_t len = 0;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if (c >= 0xc2 && c < 0xe0) {
      cp = c & 0x1f;
      len = 2;
    } else if (c >= 0xe0 && c < 0xf0) {
      cp = c & 0x0f;
      len = 3;
    } else if (c >= 0xf0 && c < 0xf5) {
      cp = c & 0x07;
      len = 4;
    }
    bool ok = len > 0 && n - i >= len;
    for (size_t k = 1; ok && k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF.
    ok = ok && !((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
                 (cp >= 0xd800 && cp <= 0xdfff));
    if (!ok) {
      if (!replace) return false;
      cp = 0xfffd;
      len = 1;
    }
    out.push_back(static_cast<typename Str::value_type>(cp));
    i += len;
  }
  return true;
}

void utf8_encode(const std::u32string& s, std::string& out) {
  out.clear();
  for (char32_t cp : s) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
}

enum class CaseAction { kNone, kLower, kUpper };

class StringNormalizer final : public Kernel {
 public:
  explicit StringNormalizer(const KernelInfo& info)
      : case_sensitive_(info.attr_int("is_case_sensitive", 0) != 0) {
    const std::string action = info.attr_string("case_change_action", "NONE");
    if (action == "NONE") {
      action_ = CaseAction::kNone;
    } else if (action == "LOWER") {
      action_ = CaseAction::kLower;
    } else if (action == "UPPER") {
      action_ = CaseAction::kUpper;
    } else {
      info.fail(StatusCode::kInvalidArgument, "attribute 'case_change_action' = '" + action +
                                                  "' is not one of LOWER, UPPER, NONE");
    }
    // The named locale when the system has it; otherwise C.UTF-8 (glibc's, with the full
    // Unicode case tables); ASCII-only mapping when neither exists.
    const std::string name = info.attr_string("locale", "en_US.UTF-8");
    for (const char* candidate : {name.c_str(), "C.UTF-8", "C.utf8"}) {
      locale_ = newlocale(LC_CTYPE_MASK, candidate, static_cast<locale_t>(0));
      if (locale_ != static_cast<locale_t>(0)) break;
    }
    for (const std::string& w : info.attr_strings("stopwords")) {
      if (case_sensitive_) {
        stopwords_.insert(w);
      } else {
        std::string folded;
        if (!change_case(w, CaseAction::kUpper, folded)) {
          info.fail(StatusCode::kInvalidArgument, "stop word '" + w + "' is not valid UTF-8");
        }
        stopwords_.insert(std::move(folded));
      }
    }
  }
  ~StringNormalizer() override {
    if (locale_ != static_cast<locale_t>(0)) freelocale(locale_);
  }
  StringNormalizer(const StringNormalizer&) = delete;
  StringNormalizer& operator=(const StringNormalizer&) = delete;

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    require_strings(ctx, x, "X");
    const bool two_d = x.rank() == 2;
    if (!(x.rank() == 1 || (two_d && x.dim(0) == 1))) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' must have shape [C] or [1, C], got " + shape_to_string(x.shape()));
    }
    const std::string* px = x.data<std::string>();
    std::vector<std::string> kept;
    std::string tmp;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (!stopwords_.empty()) {
        const std::string* key = &px[i];
        if (!case_sensitive_) {
          if (!change_case(px[i], CaseAction::kUpper, tmp)) invalid(ctx, i);
          key = &tmp;
        }
        if (stopwords_.count(*key)) continue;
      }
      if (action_ == CaseAction::kNone) {
        kept.push_back(px[i]);
      } else {
        kept.emplace_back();
        if (!change_case(px[i], action_, kept.back())) invalid(ctx, i);
      }
    }
    if (kept.empty()) kept.emplace_back();
    const int64_t c = static_cast<int64_t>(kept.size());
    Tensor& y = ctx.allocate_output(0, DataType::kString, two_d ? Shape{1, c} : Shape{c});
    std::string* py = y.data<std::string>();
    for (int64_t i = 0; i < c; ++i) py[i] = std::move(kept[i]);
  }

 private:
  [[noreturn]] static void invalid(const KernelContext& ctx, int64_t i) {
    ctx.fail(StatusCode::kInvalidArgument,
             "input 'X' element " + std::to_string(i) + " is not valid UTF-8");
  }

  bool change_case(const std::string& in, CaseAction action, std::string& out) const {
    bool ascii = true;
    for (char ch : in) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
    std::u32string cps;
    if (!ascii && !utf8_decode(in, cps)) return false;
    if (ascii || locale_ == static_cast<locale_t>(0)) {
      out = in;
      for (char& ch : out) {
        if (action == CaseAction::kLower && ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch + 32);
        if (action == CaseAction::kUpper && ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 32);
      }
      return true;
    }
    for (char32_t& cp : cps) {
      const wint_t w = static_cast<wint_t>(cp);
      cp = static_cast<char32_t>(action == CaseAction::kLower ? towlower_l(w, locale_)
                                                              : towupper_l(w, locale_));
    }
    utf8_encode(cps, out);
    return true;
  }

  bool case_sensitive_;
  CaseAction action_ = CaseAction::kNone;
  locale_t locale_ = static_cast<locale_t>(0);
  std::unordered_set<std::string> stopwords_;
};

// ---------------------------------------------------------------------------------------
// RegexFullMatch: Y[i] = whether X[i] matches `pattern` as a whole.
//
// ONNX specifies RE2 syntax; this kernel uses std::regex's ECMAScript grammar, which shares
// the common core (classes, \d \w \s \b, quantifiers, groups, alternation, anchors). RE2
// constructs it lacks ((?i)-style flags, named groups, \p{...} classes, \A \z \Q \C) are
// rejected at load rather than read differently; ECMAScript extras RE2 rejects
// (lookahead) are accepted. Pattern and inputs are matched as code points (decoded from
// UTF-8, so that `.` is one character as in RE2), through std::wregex: wchar_t holds any
// code point on the platforms ortlite builds on. libstdc++'s breadth-first executor is
// used where available: its time is linear in the input and its recursion bounded by the
// pattern, so no input string can exhaust the stack.
static_assert(sizeof(wchar_t) >= 4, "RegexFullMatch needs a wchar_t that holds a code point");

// The libstdc++ compiler recurses once per pattern element, and deeper per group nesting
// level (about half a kilobyte of stack each): bounding both keeps a compile within
// about 100 KB of stack, well inside any thread's.
constexpr size_t kMaxPatternLength = 2048;
constexpr int kMaxGroupDepth = 100;

// Checks what std::regex would misread or overflow on: returns a message, or "" when the
// pattern may be compiled. Tracks bracket classes and escapes to find group nesting.
std::string check_pattern(const std::string& p) {
  if (p.size() > kMaxPatternLength) {
    return "is " + std::to_string(p.size()) + " bytes long; at most " +
           std::to_string(kMaxPatternLength) + " are supported";
  }
  int depth = 0, deepest = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (++i == p.size()) break;
      const char e = p[i];
      // ECMAScript reads an escaped letter it does not define as the letter itself;
      // RE2's \p \A \z ... would silently mean something else.
      const bool letter = (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z');
      if (letter && std::string("dDwWsSbBfnrtvcxu").find(e) == std::string::npos) {
        return std::string("uses the escape \\") + e + ", which is not supported";
      }
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ')') {
      depth = std::max(depth - 1, 0);
    }
  }
  if (deepest > kMaxGroupDepth) {
    return "nests groups deeper than " + std::to_string(kMaxGroupDepth) +
           " levels, which is not supported";
  }
  return "";
}

class RegexFullMatch final : public Kernel {
 public:
  explicit RegexFullMatch(const KernelInfo& info) {
    if (!info.has_attr("pattern")) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'pattern' is required");
    }
    const std::string pattern = info.attr_string("pattern", "");
    const std::string problem = check_pattern(pattern);
    if (!problem.empty()) info.fail(StatusCode::kInvalidArgument, "attribute 'pattern' " + problem);
    std::wstring wide;
    if (!utf8_decode(pattern, wide)) {
      info.fail(StatusCode::kInvalidArgument, "attribute 'pattern' is not valid UTF-8");
    }
    auto flags = std::regex::ECMAScript;
#if defined(__GLIBCXX__)
    flags |= std::regex_constants::__polynomial;
#endif
    try {
      regex_.assign(wide, flags);
    } catch (const std::regex_error& e) {
      info.fail(StatusCode::kInvalidArgument, "attribute 'pattern' = '" + pattern +
                                                  "' is not a supported regular expression (" +
                                                  e.what() + ")");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    require_strings(ctx, x, "X");
    Tensor& y = ctx.allocate_output(0, DataType::kBool, x.shape());
    const std::string* px = x.data<std::string>();
    bool* py = y.data<bool>();
    const int64_t n = x.numel();
    std::wstring wide;
    try {
      for (int64_t i = 0; i < n; ++i) {
        // Malformed bytes become U+FFFD: they still count as one character each.
        utf8_decode(px[i], wide, true);
        py[i] = std::regex_match(wide, regex_);
      }
    } catch (const std::regex_error& e) {
      ctx.fail(StatusCode::kFail, std::string("regular expression match failed: ") + e.what());
    }
  }

 private:
  std::wregex regex_;
};

}  // namespace

void register_string_kernels(KernelRegistry& r) {
  r.add("", "StringConcat", 20, kMaxOpset, make_factory<StringConcat>());
  r.add("", "StringSplit", 20, kMaxOpset, make_factory<StringSplit>());
  r.add("", "StringNormalizer", 10, kMaxOpset, make_factory<StringNormalizer>());
  r.add("", "RegexFullMatch", 20, kMaxOpset, make_factory<RegexFullMatch>());
}

}  // namespace ortlite
