// The one parser behind every engine setting named by a word (engine, precision, lstm-algorithm):
// each setting has a function that names its values, and parsing is finding the value so named,
// so that a value and its name are written in one place.
#pragma once

#include <string>

namespace speakerseg {

// The value of `values` that `name_of` names `name`, into *out; false (and *out untouched) when
// none is.
template <class Value, class Values, class NameOf>
bool parse_setting_name(const std::string& name, const Values& values, NameOf name_of, Value* out) {
  for (const Value v : values)
    if (name == name_of(v)) {
      *out = v;
      return true;
    }
  return false;
}

}  // namespace speakerseg
