#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace speakerseg {

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  size_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dict << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    count *= static_cast<size_t>(shape[i]);
  }
  dict << "), }";
  std::string header = dict.str();
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write '" + path + "'");
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
  if (!f) throw std::runtime_error("short write to '" + path + "'");
}

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open '" + path + "'");
  char magic[8];
  uint16_t len = 0;
  f.read(magic, 8);
  f.read(reinterpret_cast<char*>(&len), 2);
  if (!f || std::memcmp(magic, "\x93NUMPY\x01", 7) != 0)
    throw std::runtime_error("'" + path + "' is not a version 1 .npy file");
  std::string header(len, '\0');
  f.read(&header[0], len);
  if (header.find("'<f4'") == std::string::npos || header.find("False") == std::string::npos)
    throw std::runtime_error("'" + path + "' is not a C-order float32 array");
  NpyArray a;
  const size_t open = header.find('(', header.find("shape")), close = header.find(')', open);
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  std::string item;
  size_t count = 1;
  while (std::getline(dims, item, ','))
    if (item.find_first_not_of(' ') != std::string::npos) {
      a.shape.push_back(std::stoll(item));
      count *= static_cast<size_t>(a.shape.back());
    }
  a.data.resize(count);
  f.read(reinterpret_cast<char*>(a.data.data()),
         static_cast<std::streamsize>(count * sizeof(float)));
  if (!f) throw std::runtime_error("'" + path + "' is truncated");
  return a;
}

}  // namespace speakerseg
