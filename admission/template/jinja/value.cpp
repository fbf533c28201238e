#include "admission/template/jinja/value.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace dpgate::admission::jinja {

namespace {

// Dicts up to this size are searched linearly: cheaper than hashing.
constexpr std::size_t kLinearDictEntries = 8;

std::size_t slotsFor(std::size_t entries) {
    std::size_t slots = 16;
    while (slots < entries * 2) slots *= 2;
    return slots;
}

const Value* findIndexed(const Value* keys, const Value* values, const std::uint32_t* index, std::size_t mask,
                         std::string_view key) {
    for (std::size_t slot = dictKeyHash(key) & mask;; slot = (slot + 1) & mask) {
        const std::uint32_t entry = index[slot];
        if (entry == 0) return nullptr;
        const Value& candidate = keys[entry - 1];
        if (candidate.isString() && candidate.text() == key) return &values[entry - 1];
    }
}

double numberAsDouble(const Value& v) {
    switch (v.kind()) {
        case ValueKind::boolean: return v.asBool() ? 1.0 : 0.0;
        case ValueKind::integer: return static_cast<double>(v.asInt());
        case ValueKind::big_integer: return std::strtod(std::string(v.text()).c_str(), nullptr);
        default: return v.asFloat();
    }
}

}  // namespace

std::uint64_t dictKeyHash(std::string_view key) {
    // FNV-1a: keys are short (JSON property names).
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
    return h ^ (h >> 29);
}

const Value* DictData::find(std::string_view key) const {
    if (index != nullptr) return findIndexed(keys, values, index, index_mask, key);
    for (std::size_t i = 0; i < size; ++i) {
        if (keys[i].isString() && keys[i].text() == key) return &values[i];
    }
    return nullptr;
}

const Value* NamespaceData::find(std::string_view name) const {
    for (std::size_t i = 0; i < size; ++i) {
        if (names[i] == name) return &values[i];
    }
    return nullptr;
}

void NamespaceData::set(Arena& arena, std::string_view name, Value value) {
    for (std::size_t i = 0; i < size; ++i) {
        if (names[i] == name) {
            values[i] = value;
            return;
        }
    }
    if (size == capacity) {
        const std::size_t grown = std::max<std::size_t>(8, capacity * 2);
        auto* new_names = arena.allocateArray<std::string_view>(grown);
        auto* new_values = arena.allocateArray<Value>(grown);
        std::copy(names, names + size, new_names);
        std::copy(values, values + size, new_values);
        names = new_names;
        values = new_values;
        capacity = grown;
    }
    names[size] = name;
    values[size] = value;
    ++size;
}

ListBuilder::ListBuilder(Arena& arena, std::size_t reserve)
    : arena_(arena),
      items_(arena.allocateArray<Value>(std::max<std::size_t>(reserve, 1))),
      capacity_(std::max<std::size_t>(reserve, 1)) {}

void ListBuilder::push(Value value) {
    if (size_ == capacity_) {
        Value* grown = arena_.allocateArray<Value>(capacity_ * 2);
        std::copy(items_, items_ + size_, grown);
        items_ = grown;
        capacity_ *= 2;
    }
    items_[size_++] = value;
}

Value ListBuilder::finish(bool tuple) { return Value::list(arena_.make<ListData>(ListData{items_, size_, tuple})); }

DictBuilder::DictBuilder(Arena& arena, std::size_t reserve)
    : arena_(arena),
      keys_(arena.allocateArray<Value>(std::max<std::size_t>(reserve, 1))),
      values_(arena.allocateArray<Value>(std::max<std::size_t>(reserve, 1))),
      capacity_(std::max<std::size_t>(reserve, 1)) {}

std::size_t DictBuilder::findKey(const Value& key) const {
    if (index_ != nullptr && key.isString()) {
        const Value* found = findIndexed(keys_, values_, index_, index_mask_, key.text());
        return found == nullptr ? size_ : static_cast<std::size_t>(found - values_);
    }
    if (index_ != nullptr && all_string_keys_) return size_;  // a non-string key cannot equal a string key
    for (std::size_t i = 0; i < size_; ++i) {
        if (pyEquals(keys_[i], key)) return i;
    }
    return size_;
}

void DictBuilder::rebuildIndex() {
    const std::size_t slots = slotsFor(capacity_);
    index_ = arena_.allocateArray<std::uint32_t>(slots);
    std::fill(index_, index_ + slots, 0u);
    index_mask_ = slots - 1;
    for (std::size_t i = 0; i < size_; ++i) {
        std::size_t slot = dictKeyHash(keys_[i].text()) & index_mask_;
        while (index_[slot] != 0) slot = (slot + 1) & index_mask_;
        index_[slot] = static_cast<std::uint32_t>(i + 1);
    }
}

void DictBuilder::set(Value key, Value value) {
    const std::size_t at = findKey(key);
    if (at < size_) {
        values_[at] = value;
        return;
    }
    if (!key.isString()) {
        all_string_keys_ = false;
        index_ = nullptr;  // mixed keys: linear search from now on
    }
    if (size_ == capacity_) {
        const std::size_t grown = capacity_ * 2;
        Value* keys = arena_.allocateArray<Value>(grown);
        Value* values = arena_.allocateArray<Value>(grown);
        std::copy(keys_, keys_ + size_, keys);
        std::copy(values_, values_ + size_, values);
        keys_ = keys;
        values_ = values;
        capacity_ = grown;
        if (index_ != nullptr) rebuildIndex();
    }
    keys_[size_] = key;
    values_[size_] = value;
    ++size_;
    if (all_string_keys_ && index_ == nullptr && size_ > kLinearDictEntries) {
        rebuildIndex();
    } else if (index_ != nullptr) {
        std::size_t slot = dictKeyHash(key.text()) & index_mask_;
        while (index_[slot] != 0) slot = (slot + 1) & index_mask_;
        index_[slot] = static_cast<std::uint32_t>(size_);
    }
}

Value DictBuilder::finish() {
    return Value::dict(arena_.make<DictData>(DictData{keys_, values_, size_, index_, index_mask_}));
}

namespace {

// == where at most one side is a list or dict, or the containers differ in kind.
bool scalarEquals(const Value& a, const Value& b) {
    const ValueKind ka = a.kind();
    const ValueKind kb = b.kind();
    if (a.isNumber() && b.isNumber()) {
        if (ka == ValueKind::big_integer || kb == ValueKind::big_integer) {
            if (ka == kb) return a.text() == b.text();
            if (a.isFloat() || b.isFloat()) return numberAsDouble(a) == numberAsDouble(b);
            return false;  // a big integer never equals an int64 or a bool
        }
        if (a.isFloat() || b.isFloat()) return numberAsDouble(a) == numberAsDouble(b);
        const std::int64_t ia = ka == ValueKind::boolean ? (a.asBool() ? 1 : 0) : a.asInt();
        const std::int64_t ib = kb == ValueKind::boolean ? (b.asBool() ? 1 : 0) : b.asInt();
        return ia == ib;
    }
    if (ka != kb) return false;
    switch (ka) {
        case ValueKind::undefined:
        case ValueKind::none: return true;
        case ValueKind::string: return a.text() == b.text();
        case ValueKind::namespace_: return &a.asNamespace() == &b.asNamespace();
        case ValueKind::callable: return &a.asCallable() == &b.asCallable();
        default: return false;
    }
}

// Two lists (or two dicts) being compared, element by element.
struct EqualFrame {
    const ListData* la;  // lists
    const ListData* lb;
    const DictData* da;  // dicts
    const DictData* db;
    std::size_t next;
};

// The value `db` holds under `key`, as a dict lookup finds it. Keys other
// than strings are hashable (pyHashable): scalars and tuples of them, whose
// comparison looks up no further keys.
const Value* lookup(const DictData& db, const Value& key, WorkBudget* work) {
    if (key.isString()) return db.find(key.text());
    for (std::size_t j = 0; j < db.size; ++j) {
        if (pyEquals(key, db.keys[j], work)) return &db.values[j];
    }
    return nullptr;
}

// Strings of the same length compare byte by byte: a step per 16 bytes.
void chargeScan(WorkBudget* work, const Value& a, const Value& b) {
    if (work != nullptr && a.isString() && b.isString() && a.text().size() == b.text().size()) {
        work->charge(a.text().size() >> 4);
    }
}

}  // namespace

bool pyEquals(const Value& a, const Value& b, WorkBudget* work, std::size_t depth) {
    if (!(a.isList() && b.isList()) && !(a.isDict() && b.isDict())) {
        chargeScan(work, a, b);
        return scalarEquals(a, b);
    }
    if (depth >= kMaxValueDepth) throw ValueTooDeep{"in comparison"};
    const std::size_t max_frames = kMaxValueDepth - depth;
    std::vector<EqualFrame> stack;
    // Pushes the comparison of two containers of the same kind, or says they differ at once.
    auto open = [&](const Value& x, const Value& y) {
        if (x.isList()) {
            const ListData& lx = x.asList();
            const ListData& ly = y.asList();
            if (lx.size != ly.size || lx.tuple != ly.tuple) return false;
            if (&lx == &ly)
                return true;  // the same list: every element equals itself but NaN, which Python
                              // also takes as equal by identity
            if (stack.size() == max_frames) throw ValueTooDeep{"in comparison"};
            stack.push_back({&lx, &ly, nullptr, nullptr, 0});
            return true;
        }
        const DictData& dx = x.asDict();
        const DictData& dy = y.asDict();
        if (dx.size != dy.size) return false;
        if (&dx == &dy) return true;
        if (stack.size() == max_frames) throw ValueTooDeep{"in comparison"};
        stack.push_back({nullptr, nullptr, &dx, &dy, 0});
        return true;
    };
    if (!open(a, b)) return false;
    while (!stack.empty()) {
        EqualFrame& frame = stack.back();
        const std::size_t i = frame.next++;
        const Value* x = nullptr;
        const Value* y = nullptr;
        if (frame.la != nullptr) {
            if (i == frame.la->size) {
                stack.pop_back();
                continue;
            }
            x = &frame.la->items[i];
            y = &frame.lb->items[i];
        } else {
            if (i == frame.da->size) {
                stack.pop_back();
                continue;
            }
            x = &frame.da->values[i];
            y = lookup(*frame.db, frame.da->keys[i], work);
            if (y == nullptr) return false;
        }
        if (work != nullptr) work->charge(1);
        chargeScan(work, *x, *y);
        const bool nested = (x->isList() && y->isList()) || (x->isDict() && y->isDict());
        if (nested ? !open(*x, *y) : !scalarEquals(*x, *y)) return false;
    }
    return true;
}

const Value* pyUnhashablePart(const Value& v) {
    if (!v.isList() && !v.isDict()) return nullptr;
    if (v.isDict() || !v.asList().tuple) return &v;
    // A tuple: every item, depth first.
    struct Frame {
        const ListData* list;
        std::size_t next;
    };
    std::vector<Frame> stack{{&v.asList(), 0}};
    while (!stack.empty()) {
        Frame& frame = stack.back();
        if (frame.next == frame.list->size) {
            stack.pop_back();
            continue;
        }
        const Value& item = frame.list->items[frame.next++];
        if (item.isDict() || (item.isList() && !item.asList().tuple)) return &item;
        if (item.isList()) {
            if (stack.size() == kMaxValueDepth) throw ValueTooDeep{"while calling a Python object"};
            stack.push_back({&item.asList(), 0});
        }
    }
    return nullptr;
}

}  // namespace dpgate::admission::jinja
