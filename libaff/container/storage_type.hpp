// Storage types of tensors in an .aff container (formats/container.md §6). The numeric
// IDs are written to files and never change; a new type is one enum value here, one row
// in storage_type.cpp's table and one row in the spec's table. IDs 0x0100-0x01FF are
// reserved for the codebook-quantised types that libaff/quant defines.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace aff {

enum class StorageType : std::uint16_t {
    F32 = 1,
    F16 = 2,
    BF16 = 3,
    F64 = 4,
    I8 = 5,
    I16 = 6,
    I32 = 7,
    I64 = 8,
    U8 = 9,
    F8_E4M3 = 10,   // "fn" variant: bias 7, max 448, no infinities
    F8_E8M0 = 11,   // power-of-two scale 2^(b-127)
    FP4_E2M1 = 12,  // two values a byte along the last dimension, low nibble first
    // Codebook-quantised types (formats/quant-codebook.md §2): 92-byte blocks of 256.
    TQ2875 = 0x0100,
    TQ2875R = 0x0101,  // the same, stored rotated: decode with the input Hadamard-transformed
};

// First and last ID of the range kept for codebook-quantised types (libaff/quant).
constexpr std::uint16_t kFirstCodebookType = 0x0100;
constexpr std::uint16_t kLastCodebookType = 0x01FF;

// How a type's byte length follows from a shape. The last dimension is stored in blocks
// of `block_elems` elements taking `block_bytes` bytes each (the last block of a row
// may be partial and takes a whole block); every other dimension multiplies. A type
// with block_elems == 0 has no such rule: its length is whatever the directory says.
struct StorageTypeInfo {
    StorageType type;
    std::string_view name;
    std::uint32_t block_elems;
    std::uint32_t block_bytes;
};

// nullptr when the ID is not a type this build knows.
const StorageTypeInfo* storage_type_info(std::uint16_t id);
inline const StorageTypeInfo* storage_type_info(StorageType t) { return storage_type_info(static_cast<std::uint16_t>(t)); }
std::span<const StorageTypeInfo> storage_types();

std::string_view to_string(StorageType type);  // "BF16"; "type#300" when unknown
std::optional<StorageType> parse_storage_type(std::string_view name);

// Bytes a tensor of this type and shape takes; nullopt when the type has no rule (its
// length is explicit) or the ID is unknown, or when the product overflows 64 bits.
// An empty shape is a scalar (one element).
std::optional<std::uint64_t> storage_bytes(StorageType type, std::span<const std::uint64_t> shape);

}  // namespace aff
