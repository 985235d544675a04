// Writes a small random-weight Chronos-2 checkpoint (real parameter names, HF layout) into a directory:
//   make_test_checkpoint <dir>
#include <cstdio>

#include "tests/support/fixtures.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    cn::test::write_chronos2_checkpoint(argv[1]);
    std::printf("wrote %s/config.json and %s/model.safetensors\n", argv[1], argv[1]);
    return 0;
}
