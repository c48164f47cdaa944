/*
 * toml_json: a TOML document as a jansson object, so that the C readers
 * (cli_torchtitan.c) walk one kind of tree. The parsing is toml++'s
 * (Debian's libtomlplusplus-dev, TOML 1.0): Debian 12 ships no C TOML
 * library, and a TOML parser is not loong's to write.
 *
 * Tables become objects, arrays arrays, strings strings, integers
 * integers, floats reals, booleans true/false. Dates and times, which no
 * job configuration of torchtitan's uses, are refused.
 *
 * Layer: cli.
 */
#include <cstdio>
#include <string>

#include <jansson.h>
#include <toml++/toml.h>

#include "toml_json.h"

namespace
{

/* Convert node n (at dotted path `at`) into a new jansson value; NULL with
 * a message in err for a date or time. */
json_t *convert(const toml::node &n, const std::string &at, const char *what, char err[LOONG_ERRLEN])
{
    if (const toml::table *t = n.as_table()) {
        json_t *o = json_object();
        for (auto &&[k, v] : *t) {
            std::string key(k.str());
            json_t *c = convert(v, at.empty() ? key : at + "." + key, what, err);
            if (!c) {
                json_decref(o);
                return nullptr;
            }
            json_object_setn_new(o, key.data(), key.size(), c);
        }
        return o;
    }
    if (const toml::array *a = n.as_array()) {
        json_t *o = json_array();
        for (size_t i = 0; i < a->size(); i++) {
            json_t *c = convert((*a)[i], at + "[" + std::to_string(i) + "]", what, err);
            if (!c) {
                json_decref(o);
                return nullptr;
            }
            json_array_append_new(o, c);
        }
        return o;
    }
    if (const auto *s = n.as_string()) return json_stringn(s->get().data(), s->get().size());
    if (const auto *i = n.as_integer()) return json_integer((json_int_t)i->get());
    if (const auto *f = n.as_floating_point()) return json_real(f->get());
    if (const auto *b = n.as_boolean()) return json_boolean(b->get());
    std::snprintf(err, LOONG_ERRLEN, "%s: %s is a date or time, which no torchtitan setting takes", what, at.c_str());
    return nullptr;
}

} // namespace

json_t *cli_toml_parse(const char *text, const char *what, char err[LOONG_ERRLEN])
{
    try {
        toml::table t = toml::parse(std::string_view(text), std::string_view(what));
        return convert(t, "", what, err);
    } catch (const toml::parse_error &e) {
        std::snprintf(err, LOONG_ERRLEN, "%s: line %u: not TOML: %.*s", what, (unsigned)e.source().begin.line,
                      (int)e.description().size(), e.description().data());
    } catch (const std::exception &e) {
        std::snprintf(err, LOONG_ERRLEN, "%s: %s", what, e.what());
    }
    return nullptr;
}
