// The reference annotations of the shared recordings: RTTM files, one SPEAKER line per turn
// ("SPEAKER <uri> <channel> <start> <duration> <NA> <NA> <who> ..."), for the tests that score
// what they announce against them.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace speakerseg::test {

struct Turn {
  std::string speaker;
  double start = 0, end = 0;  // seconds
};

// The turns of `path` (of recording `uri` only, where given), shifted by `offset` seconds. A file
// that cannot be read gives none; the callers check that they got some.
inline std::vector<Turn> read_rttm(const std::string& path, const std::string& uri = "",
                                   double offset = 0) {
  std::vector<Turn> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string type, name, channel, na1, na2, who;
    double start = 0, duration = 0;
    if (!(s >> type >> name >> channel >> start >> duration) || type != "SPEAKER") continue;
    s >> na1 >> na2 >> who;
    if (uri.empty() || name == uri) out.push_back({who, start + offset, start + duration + offset});
  }
  return out;
}

// Every start and end of an annotated turn.
inline std::vector<double> turn_boundaries(const std::vector<Turn>& turns) {
  std::vector<double> b;
  for (const Turn& t : turns) {
    b.push_back(t.start);
    b.push_back(t.end);
  }
  return b;
}

}  // namespace speakerseg::test
