// Writes a small random-weight Chronos-2 checkpoint (real parameter names, HF layout) into a directory:
//   make_test_checkpoint <dir>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/stat.h>

#include "tests/support/fixtures.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    if (::mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
        std::fprintf(stderr, "cannot create %s: %s\n", argv[1], std::strerror(errno));
        return 1;
    }
    cn::test::write_chronos2_checkpoint(argv[1]);
    if (cn::test::read_file(std::string(argv[1]) + "/config.json").empty()) {
        std::fprintf(stderr, "cannot write into %s\n", argv[1]);
        return 1;
    }
    std::printf("wrote %s/config.json and %s/model.safetensors\n", argv[1], argv[1]);
    return 0;
}
