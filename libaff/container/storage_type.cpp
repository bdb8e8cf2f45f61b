// The table of storage types (formats/container.md §6, same rows in the same order).
#include "libaff/container/storage_type.hpp"

#include <array>
#include <string>

namespace aff {
namespace {

constexpr std::array<StorageTypeInfo, 14> kTypes{{
    {StorageType::F32, "F32", 1, 4},
    {StorageType::F16, "F16", 1, 2},
    {StorageType::BF16, "BF16", 1, 2},
    {StorageType::F64, "F64", 1, 8},
    {StorageType::I8, "I8", 1, 1},
    {StorageType::I16, "I16", 1, 2},
    {StorageType::I32, "I32", 1, 4},
    {StorageType::I64, "I64", 1, 8},
    {StorageType::U8, "U8", 1, 1},
    {StorageType::F8_E4M3, "F8_E4M3", 1, 1},
    {StorageType::F8_E8M0, "F8_E8M0", 1, 1},
    {StorageType::FP4_E2M1, "FP4_E2M1", 2, 1},
    {StorageType::TQ2875, "TQ2875", 256, 92},
    {StorageType::TQ2875R, "TQ2875R", 256, 92},
}};

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    return __builtin_mul_overflow(a, b, &out);
}

}  // namespace

std::span<const StorageTypeInfo> storage_types() { return kTypes; }

const StorageTypeInfo* storage_type_info(std::uint16_t id) {
    for (const StorageTypeInfo& t : kTypes)
        if (static_cast<std::uint16_t>(t.type) == id) return &t;
    return nullptr;
}

std::string_view to_string(StorageType type) {
    if (const StorageTypeInfo* t = storage_type_info(type)) return t->name;
    static thread_local std::string unknown;
    unknown = "type#" + std::to_string(static_cast<unsigned>(type));
    return unknown;
}

std::optional<StorageType> parse_storage_type(std::string_view name) {
    for (const StorageTypeInfo& t : kTypes)
        if (t.name == name) return t.type;
    return std::nullopt;
}

std::optional<std::uint64_t> storage_bytes(StorageType type, std::span<const std::uint64_t> shape) {
    const StorageTypeInfo* t = storage_type_info(type);
    if (!t || t->block_elems == 0) return std::nullopt;
    std::uint64_t rows = 1, last = 1;
    if (!shape.empty()) {
        last = shape.back();
        for (std::size_t i = 0; i + 1 < shape.size(); ++i)
            if (mul_overflows(rows, shape[i], rows)) return std::nullopt;
    }
    const std::uint64_t blocks = last / t->block_elems + (last % t->block_elems != 0);
    std::uint64_t row_bytes = 0, total = 0;
    if (mul_overflows(blocks, t->block_bytes, row_bytes) || mul_overflows(rows, row_bytes, total)) return std::nullopt;
    return total;
}

}  // namespace aff
