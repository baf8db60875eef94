// Bounds-checked protobuf wire-format reader (no libprotobuf). Every read checks what
// remains; every failure throws Error(kInvalidProtobuf) naming the message, the field and
// the byte offset in the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "ortlite/status.h"

namespace ortlite::pb {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLen = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

inline const char* wire_type_name(uint32_t w) {
  switch (w) {
    case kVarint:
      return "varint";
    case kFixed64:
      return "fixed64";
    case kLen:
      return "length-delimited";
    case kStartGroup:
      return "start-group";
    case kEndGroup:
      return "end-group";
    case kFixed32:
      return "fixed32";
    default:
      return "invalid";
  }
}

// A view of bytes inside the input.
struct Span {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string str() const { return std::string(reinterpret_cast<const char*>(data), size); }
};

// Reads the fields of one message: `while (r.next()) switch (r.field()) { ... }`.
class Reader {
 public:
  // `base` is the start of the whole input (for byte offsets in messages); `message` is
  // the protobuf message name for messages ("TensorProto").
  Reader(const uint8_t* data, size_t size, const uint8_t* base, const char* message)
      : p_(data), end_(data + size), base_(base), message_(message) {}

  const char* message() const { return message_; }
  size_t offset() const { return static_cast<size_t>(p_ - base_); }
  bool at_end() const { return p_ == end_; }
  // The bytes not read yet (all of a message's bytes before the first next()).
  Span remaining() const { return Span{p_, static_cast<size_t>(end_ - p_)}; }
  uint32_t field() const { return field_; }
  uint32_t wire() const { return wire_; }

  // Reads the next tag. False at the end of the message.
  bool next() {
    if (p_ == end_) return false;
    tag_offset_ = offset();
    uint64_t tag = raw_varint("tag");
    if (tag > 0xFFFFFFFFu) fail_at(tag_offset_, "tag does not fit in 32 bits");
    field_ = static_cast<uint32_t>(tag >> 3);
    wire_ = static_cast<uint32_t>(tag & 7);
    if (field_ == 0) fail_at(tag_offset_, "field number 0");
    if (wire_ > kFixed32) fail("invalid wire type ", wire_);
    if (wire_ == kEndGroup) fail("unexpected end-group tag");
    return true;
  }

  // --- scalars (the wire type is checked) ---
  uint64_t read_varint() {
    expect(kVarint);
    return raw_varint("varint");
  }
  int64_t read_int64() { return static_cast<int64_t>(read_varint()); }
  // int32 / enum: protobuf truncates the (sign-extended) varint to 32 bits.
  int32_t read_int32() { return static_cast<int32_t>(static_cast<uint32_t>(read_varint())); }
  float read_float() {
    expect(kFixed32);
    uint32_t u = raw_fixed32();
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // Strict UTF-8 (no overlong forms, no surrogates, at most U+10FFFF), as Python decodes.
  static bool valid_utf8(const uint8_t* p, size_t n) {
    size_t i = 0;
    while (i < n) {
      uint8_t c = p[i];
      if (c < 0x80) {
        ++i;
        continue;
      }
      size_t len;
      uint32_t cp;
      if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
      } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
      } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
      } else {
        return false;
      }
      if (n - i < len) return false;
      for (size_t k = 1; k < len; ++k) {
        if ((p[i + k] & 0xC0) != 0x80) return false;
        cp = (cp << 6) | (p[i + k] & 0x3F);
      }
      if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
          (cp >= 0xD800 && cp <= 0xDFFF))
        return false;
      i += len;
    }
    return true;
  }

  Span read_bytes() {
    expect(kLen);
    return raw_bytes();
  }
  // A protobuf `string` field: must be valid UTF-8 (names reach Python as str).
  std::string read_string() {
    Span s = read_bytes();
    if (!valid_utf8(s.data, s.size)) fail("field ", field_, " is not valid UTF-8");
    return s.str();
  }
  // A protobuf `bytes` field.
  std::string read_raw_string() { return read_bytes().str(); }
  // A nested message.
  Reader read_message(const char* message) {
    Span s = read_bytes();
    return Reader(s.data, s.size, base_, message);
  }

  // --- repeated scalars: packed (one length-delimited run) or unpacked (one per tag) ---
  // `fn` is called once per element (call at the field's tag; see next()).
  template <typename Fn>
  void read_repeated_varint(Fn&& fn) {
    if (wire_ == kVarint) {
      fn(raw_varint("varint"));
      return;
    }
    expect_packable(kVarint);
    Span s = raw_bytes();
    Reader sub(s.data, s.size, base_, message_);
    sub.field_ = field_;
    while (!sub.at_end()) fn(sub.raw_varint("packed varint"));
  }
  template <typename Fn>
  void read_repeated_fixed32(Fn&& fn) {
    if (wire_ == kFixed32) {
      fn(raw_fixed32());
      return;
    }
    expect_packable(kFixed32);
    Span s = raw_bytes();
    if (s.size % 4 != 0) fail("packed fixed32 run of ", s.size, " bytes is not a multiple of 4");
    for (size_t i = 0; i < s.size; i += 4) fn(load32(s.data + i));
  }
  template <typename Fn>
  void read_repeated_fixed64(Fn&& fn) {
    if (wire_ == kFixed64) {
      fn(raw_fixed64());
      return;
    }
    expect_packable(kFixed64);
    Span s = raw_bytes();
    if (s.size % 8 != 0) fail("packed fixed64 run of ", s.size, " bytes is not a multiple of 8");
    for (size_t i = 0; i < s.size; i += 8) fn(load64(s.data + i));
  }
  // Upper bound on the number of elements the current repeated field occurrence holds
  // (for reserve()); justified by the bytes present.
  size_t peek_repeated_count(uint32_t scalar_wire) const {
    if (wire_ != kLen) return 1;
    const uint8_t* p = p_;
    uint64_t len = 0;
    for (int i = 0; i < 10 && p < end_; ++i, ++p) {
      len |= static_cast<uint64_t>(*p & 0x7F) << (7 * i);
      if (!(*p & 0x80)) {
        ++p;
        size_t remain = static_cast<size_t>(end_ - p);
        if (len > remain) return 0;
        if (scalar_wire == kFixed32) return static_cast<size_t>(len / 4);
        if (scalar_wire == kFixed64) return static_cast<size_t>(len / 8);
        return static_cast<size_t>(len);
      }
    }
    return 0;
  }

  // Skips the current field's value, whatever its wire type (groups included).
  void skip() { skip_value(field_, wire_, 0); }

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    fail_at(tag_offset_, parts...);
  }

  void expect(uint32_t w) const {
    if (wire_ != w)
      fail("field ", field_, " has wire type ", wire_type_name(wire_), ", expected ",
           wire_type_name(w));
  }

 private:
  static constexpr int kMaxGroupDepth = 64;

  template <typename... Parts>
  [[noreturn]] void fail_at(size_t off, const Parts&... parts) const {
    ORTLITE_THROW(kInvalidProtobuf, "invalid protobuf in ", message_, " at byte ", off, ": ",
                  parts...);
  }

  void expect_packable(uint32_t scalar) const {
    if (wire_ != kLen)
      fail("repeated field ", field_, " has wire type ", wire_type_name(wire_), ", expected ",
           wire_type_name(scalar), " or packed");
  }

  uint64_t raw_varint(const char* what) {
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (p_ == end_) fail_at(offset(), "truncated ", what, " in field ", field_);
      uint8_t b = *p_++;
      if (i == 9 && b > 1) fail_at(offset() - 1, "varint longer than 64 bits in field ", field_);
      v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
      if (!(b & 0x80)) return v;
    }
    fail_at(offset(), "varint longer than 10 bytes in field ", field_);
  }
  static uint32_t load32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
           static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  }
  static uint64_t load64(const uint8_t* p) {
    return static_cast<uint64_t>(load32(p)) | static_cast<uint64_t>(load32(p + 4)) << 32;
  }
  uint32_t raw_fixed32() {
    if (static_cast<size_t>(end_ - p_) < 4)
      fail_at(offset(), "truncated fixed32 in field ", field_);
    uint32_t v = load32(p_);
    p_ += 4;
    return v;
  }
  uint64_t raw_fixed64() {
    if (static_cast<size_t>(end_ - p_) < 8)
      fail_at(offset(), "truncated fixed64 in field ", field_);
    uint64_t v = load64(p_);
    p_ += 8;
    return v;
  }
  Span raw_bytes() {
    uint64_t len = raw_varint("length");
    size_t remain = static_cast<size_t>(end_ - p_);
    if (len > remain)
      fail("length ", len, " of field ", field_, " exceeds the ", remain, " bytes that remain");
    Span s{p_, static_cast<size_t>(len)};
    p_ += len;
    return s;
  }

  void skip_value(uint32_t field, uint32_t wire, int depth) {
    switch (wire) {
      case kVarint:
        raw_varint("varint");
        return;
      case kFixed64:
        raw_fixed64();
        return;
      case kFixed32:
        raw_fixed32();
        return;
      case kLen:
        raw_bytes();
        return;
      case kStartGroup: {
        if (depth >= kMaxGroupDepth) fail("groups nested deeper than ", kMaxGroupDepth);
        for (;;) {
          if (p_ == end_) fail_at(offset(), "unterminated group (field ", field, ")");
          size_t at = offset();
          uint64_t tag = raw_varint("tag");
          if (tag > 0xFFFFFFFFu) fail_at(at, "tag does not fit in 32 bits");
          uint32_t f = static_cast<uint32_t>(tag >> 3), w = static_cast<uint32_t>(tag & 7);
          if (f == 0) fail_at(at, "field number 0");
          if (w == kEndGroup) {
            if (f != field) fail_at(at, "end-group tag for field ", f, " closes group ", field);
            return;
          }
          if (w > kFixed32) fail_at(at, "invalid wire type ", w);
          skip_value(f, w, depth + 1);
        }
      }
      default:
        fail("cannot skip field ", field, " with wire type ", wire);
    }
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* base_;
  const char* message_;
  uint32_t field_ = 0;
  uint32_t wire_ = 0;
  size_t tag_offset_ = 0;
};

}  // namespace ortlite::pb
