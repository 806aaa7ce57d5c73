// SPDX-License-Identifier: MIT
// The symbolic operations of a torch.export graph (sizes and the arithmetic on them: _operator.*,
// torch.sym_*, math.*) computed with Python's semantics on ints, floats and bools: `n * 0.5` is
// a float, `n // 2` floors, `-7 % 3` is 2, `n / 4` is always a float.
#include <cmath>
#include <map>
#include <stdexcept>

#include "model/export_program.h"

namespace ampscope::detail::pt2 {
namespace {

/// A Python number: bool, int or float (bool is an int in arithmetic).
struct Num {
    enum class Kind { Bool, Int, Float };
    Kind kind = Kind::Int;
    int64_t i = 0;
    double f = 0;
    bool is_float() const { return kind == Kind::Float; }
    double as_double() const { return is_float() ? f : double(i); }
};

Num of(const c10::IValue& v) {
    if (v.isBool()) return {Num::Kind::Bool, int64_t(v.toBool()), 0};
    if (v.isInt()) return {Num::Kind::Int, v.toInt(), 0};
    if (v.isDouble()) return {Num::Kind::Float, 0, v.toDouble()};
    throw std::invalid_argument("a symbolic operand that is not an int, float or bool (" + v.tagKind() + ")");
}

c10::IValue value(const Num& n) {
    switch (n.kind) {
        case Num::Kind::Bool: return c10::IValue(n.i != 0);
        case Num::Kind::Int: return c10::IValue(n.i);
        case Num::Kind::Float: return c10::IValue(n.f);
    }
    return c10::IValue(n.i);
}

Num integer(int64_t v) {
    return {Num::Kind::Int, v, 0};
}
Num real(double v) {
    return {Num::Kind::Float, 0, v};
}
Num boolean(bool v) {
    return {Num::Kind::Bool, int64_t(v), 0};
}

void nonzero(const Num& b) {
    if (b.as_double() == 0) throw std::domain_error("division by zero");
}

/// Python's float divmod (Objects/floatobject.c): the floor quotient and the modulo with the divisor's sign.
std::pair<double, double> float_divmod(double a, double b) {
    double mod = std::fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, b);
    }
    double floordiv = 0;
    if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = std::copysign(0.0, a / b);
    }
    return {floordiv, mod};
}

int64_t int_floordiv(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t int_mod(int64_t a, int64_t b) {
    const int64_t m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

Num power(const Num& a, const Num& b) {
    if (!a.is_float() && !b.is_float() && b.i >= 0) {
        int64_t r = 1, base = a.i;
        for (int64_t e = b.i; e > 0; e >>= 1) {
            if (e & 1) r *= base;
            base *= base;
        }
        return integer(r);
    }
    if (a.as_double() == 0 && b.as_double() < 0) throw std::domain_error("0.0 cannot be raised to a negative power");
    return real(std::pow(a.as_double(), b.as_double()));
}

using Binary = Num (*)(const Num&, const Num&);

const std::map<std::string, Binary>& binaries() {
    static const std::map<std::string, Binary> ops{
        {"add",
         [](const Num& a, const Num& b) {
             return a.is_float() || b.is_float() ? real(a.as_double() + b.as_double()) : integer(a.i + b.i);
         }},
        {"sub",
         [](const Num& a, const Num& b) {
             return a.is_float() || b.is_float() ? real(a.as_double() - b.as_double()) : integer(a.i - b.i);
         }},
        {"mul",
         [](const Num& a, const Num& b) {
             return a.is_float() || b.is_float() ? real(a.as_double() * b.as_double()) : integer(a.i * b.i);
         }},
        {"truediv",
         [](const Num& a, const Num& b) {
             nonzero(b);
             return real(a.as_double() / b.as_double());
         }},
        {"floordiv",
         [](const Num& a, const Num& b) {
             nonzero(b);
             return a.is_float() || b.is_float() ? real(float_divmod(a.as_double(), b.as_double()).first)
                                                 : integer(int_floordiv(a.i, b.i));
         }},
        {"mod",
         [](const Num& a, const Num& b) {
             nonzero(b);
             return a.is_float() || b.is_float() ? real(float_divmod(a.as_double(), b.as_double()).second)
                                                 : integer(int_mod(a.i, b.i));
         }},
        {"pow", power},
        {"sym_max", [](const Num& a, const Num& b) { return b.as_double() > a.as_double() ? b : a; }},
        {"sym_min", [](const Num& a, const Num& b) { return b.as_double() < a.as_double() ? b : a; }},
        {"eq", [](const Num& a, const Num& b) { return boolean(a.as_double() == b.as_double()); }},
        {"ne", [](const Num& a, const Num& b) { return boolean(a.as_double() != b.as_double()); }},
        {"lt", [](const Num& a, const Num& b) { return boolean(a.as_double() < b.as_double()); }},
        {"le", [](const Num& a, const Num& b) { return boolean(a.as_double() <= b.as_double()); }},
        {"gt", [](const Num& a, const Num& b) { return boolean(a.as_double() > b.as_double()); }},
        {"ge", [](const Num& a, const Num& b) { return boolean(a.as_double() >= b.as_double()); }},
        {"and_",
         [](const Num& a, const Num& b) {
             return a.kind == Num::Kind::Bool && b.kind == Num::Kind::Bool ? boolean(a.i && b.i) : integer(a.i & b.i);
         }},
        {"or_",
         [](const Num& a, const Num& b) {
             return a.kind == Num::Kind::Bool && b.kind == Num::Kind::Bool ? boolean(a.i || b.i) : integer(a.i | b.i);
         }},
    };
    return ops;
}

using Unary = Num (*)(const Num&);

const std::map<std::string, Unary>& unaries() {
    static const std::map<std::string, Unary> ops{
        {"neg", [](const Num& a) { return a.is_float() ? real(-a.f) : integer(-a.i); }},
        {"pos", [](const Num& a) { return a.is_float() ? a : integer(a.i); }},
        {"abs", [](const Num& a) { return a.is_float() ? real(std::fabs(a.f)) : integer(a.i < 0 ? -a.i : a.i); }},
        {"sym_float", [](const Num& a) { return real(a.as_double()); }},
        {"sym_int", [](const Num& a) { return integer(a.is_float() ? int64_t(std::trunc(a.f)) : a.i); }},
        {"sym_not", [](const Num& a) { return boolean(a.as_double() == 0); }},
        {"not_", [](const Num& a) { return boolean(a.as_double() == 0); }},
        {"ceil", [](const Num& a) { return integer(a.is_float() ? int64_t(std::ceil(a.f)) : a.i); }},
        {"floor", [](const Num& a) { return integer(a.is_float() ? int64_t(std::floor(a.f)) : a.i); }},
        {"trunc", [](const Num& a) { return integer(a.is_float() ? int64_t(std::trunc(a.f)) : a.i); }},
        {"sqrt",
         [](const Num& a) {
             if (a.as_double() < 0) throw std::domain_error("math domain error (sqrt of a negative number)");
             return real(std::sqrt(a.as_double()));
         }},
        {"_sym_sqrt",
         [](const Num& a) {
             if (a.as_double() < 0) throw std::domain_error("math domain error (sqrt of a negative number)");
             return real(std::sqrt(a.as_double()));
         }},
    };
    return ops;
}

/// The operation a target names, if it comes from a namespace whose semantics it follows.
std::string op_of(const std::string& target) {
    for (const char* ns : {"_operator.", "torch.", "math."})
        if (target.rfind(ns, 0) == 0) return target.substr(std::string(ns).size());
    return "";
}

}  // namespace

int sym_arity(const std::string& target) {
    const std::string f = op_of(target);
    if (f.empty()) return -1;
    if (target.rfind("math.", 0) == 0 && f != "ceil" && f != "floor" && f != "trunc" && f != "sqrt") return -1;
    if (unaries().count(f)) return 1;
    if (binaries().count(f)) return 2;
    if (f == "sym_ite") return 3;
    return -1;
}

c10::IValue sym_eval(const std::string& target, const std::vector<c10::IValue>& args) {
    const std::string f = op_of(target);
    if (int(args.size()) != sym_arity(target))
        throw std::invalid_argument("symbolic operation '" + target + "' with " + std::to_string(args.size()) +
                                    " arguments");
    if (f == "sym_ite") return of(args[0]).as_double() != 0 ? args[1] : args[2];
    if (args.size() == 1) return value(unaries().at(f)(of(args[0])));
    return value(binaries().at(f)(of(args[0]), of(args[1])));
}

}  // namespace ampscope::detail::pt2
