// BPE merging (see bpe.hpp). Short words, the common case, use a plain scan for the
// lowest-ranked pair; long words (runs of letters or spaces thousands of bytes long) use
// a priority queue over a linked list so that they stay O(n log n).
#include "libaff/tokenizer/bpe.hpp"

#include "libaff/core/error.hpp"

#include <queue>

namespace aff::tokenizer {
namespace {

constexpr std::size_t scan_limit = 48;  // above this many bytes, use the queue

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

}  // namespace

BpeModel::BpeModel(std::vector<TokenId> byte_tokens, const std::vector<Merge>& merges)
    : byte_tokens_(std::move(byte_tokens)) {
    if (byte_tokens_.size() != 256) throw_internal("BpeModel needs 256 byte tokens");
    std::size_t size = 1024;
    while (size < merges.size() * 2) size *= 2;
    slots_.assign(size, Slot{0, 0, 0});
    mask_ = size - 1;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const Merge& m = merges[rank];
        std::uint64_t key = pair_key(m.left, m.right);
        std::uint64_t i = mix(key) & mask_;
        while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask_;
        // A pair listed twice takes its last rank: Hugging Face collects the merges into
        // a hash map in order, so the later entry overwrites the earlier.
        slots_[i] = Slot{key, static_cast<std::uint32_t>(rank), m.result};
    }
}

const BpeModel::Slot* BpeModel::find(TokenId a, TokenId b) const {
    std::uint64_t key = pair_key(a, b);
    std::uint64_t i = mix(key) & mask_;
    while (true) {
        const Slot& s = slots_[i];
        if (s.key == key) return &s;
        if (s.key == 0) return nullptr;
        i = (i + 1) & mask_;
    }
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
    if (word.size() <= scan_limit) encode_word_scan(word, out);
    else encode_word_queue(word, out);
}

void BpeModel::encode_word_scan(std::string_view word, std::vector<TokenId>& out) const {
    TokenId ids[scan_limit * 2];
    std::vector<TokenId> heap_ids;
    TokenId* sym = ids;
    if (word.size() > scan_limit * 2) {
        heap_ids.resize(word.size());
        sym = heap_ids.data();
    }
    std::size_t n = word.size();
    for (std::size_t i = 0; i < n; ++i) sym[i] = byte_tokens_[static_cast<unsigned char>(word[i])];
    while (n > 1) {
        std::uint32_t best = UINT32_MAX;
        std::size_t at = 0;
        TokenId result = 0;
        for (std::size_t i = 0; i + 1 < n; ++i) {
            const Slot* s = find(sym[i], sym[i + 1]);
            if (s && s->rank < best) {
                best = s->rank;
                at = i;
                result = s->result;
            }
        }
        if (best == UINT32_MAX) break;
        sym[at] = result;
        for (std::size_t i = at + 1; i + 1 < n; ++i) sym[i] = sym[i + 1];
        --n;
    }
    out.insert(out.end(), sym, sym + n);
}

void BpeModel::encode_word_queue(std::string_view word, std::vector<TokenId>& out) const {
    const std::size_t n = word.size();
    std::vector<TokenId> sym(n);
    std::vector<std::int64_t> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (std::size_t i = 0; i < n; ++i) {
        sym[i] = byte_tokens_[static_cast<unsigned char>(word[i])];
        prev[i] = std::int64_t(i) - 1;
        next[i] = i + 1 < n ? std::int64_t(i + 1) : -1;
    }
    // (rank, left position, the two ids when queued): an entry is stale when either
    // symbol has changed since, which the ids detect.
    struct Entry {
        std::uint32_t rank;
        std::int64_t pos;
        TokenId left, right, result;
        bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    auto push = [&](std::int64_t i) {
        if (i < 0 || next[i] < 0) return;
        if (const Slot* s = find(sym[i], sym[next[i]])) queue.push(Entry{s->rank, i, sym[i], sym[next[i]], s->result});
    };
    for (std::size_t i = 0; i + 1 < n; ++i) push(std::int64_t(i));
    while (!queue.empty()) {
        Entry e = queue.top();
        queue.pop();
        std::int64_t i = e.pos;
        if (!alive[i] || next[i] < 0 || sym[i] != e.left || sym[next[i]] != e.right) continue;
        std::int64_t j = next[i];
        sym[i] = e.result;
        alive[j] = false;
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        push(prev[i]);
        push(i);
    }
    for (std::int64_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
}

}  // namespace aff::tokenizer
