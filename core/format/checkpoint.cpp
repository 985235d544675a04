#include "core/format/checkpoint.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "core/common/status.h"
#include "core/format/shard_index.h"

namespace cn::format {
namespace {

struct DirFd {
    int fd;
    ~DirFd() { ::close(fd); }
};

bool exists_at(int dir_fd, const std::string& name) { return ::faccessat(dir_fd, name.c_str(), F_OK, 0) == 0; }

}  // namespace

int open_directory(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        if (e == ENOENT || e == ENOTDIR) fail(Status::kNotFound, dir + ": no such directory");
        fail(Status::kInternal, dir + ": cannot open directory: " + std::strerror(e));
    }
    return fd;
}

std::shared_ptr<const Checkpoint> Checkpoint::open(const std::string& dir, const std::string& stem) {
    DirFd d{open_directory(dir)};
    auto ck = std::make_shared<Checkpoint>();
    ck->dir_ = dir;
    const std::string index_name = stem + ".safetensors.index.json";
    const std::string single_name = stem + ".safetensors";

    auto add_shard = [&](const std::string& name) -> Shard* {
        auto s = std::make_unique<Shard>();
        s->file = MappedFile::open_at(d.fd, name, dir + "/" + name);
        s->header = parse_safetensors(s->file.data(), s->file.size(), s->file.label());
        ck->shards_.push_back(std::move(s));
        return ck->shards_.back().get();
    };

    if (exists_at(d.fd, index_name)) {
        const std::string label = dir + "/" + index_name;
        const ShardIndex idx = parse_shard_index(read_small_file_at(d.fd, index_name, label, 64u * 1000u * 1000u), label);
        for (const auto& name : idx.shards) {
            Shard* s = add_shard(name);
            for (const auto& t : s->header.tensors) {
                auto w = idx.weight_map.find(t.name);
                if (w == idx.weight_map.end()) {
                    fail(Status::kModelFormat, s->file.label() + ": tensor \"" + t.name + "\" is not listed in " + index_name);
                }
                if (w->second != name) {
                    fail(Status::kModelFormat,
                         s->file.label() + ": tensor \"" + t.name + "\" is listed in " + index_name + " under shard " + w->second);
                }
                if (!ck->tensors_.emplace(t.name, Ref{s, &t}).second) {
                    fail(Status::kModelFormat, s->file.label() + ": tensor \"" + t.name + "\" appears in two shards");
                }
            }
        }
        for (const auto& [tensor, shard] : idx.weight_map) {
            if (!ck->tensors_.count(tensor)) {
                fail(Status::kModelFormat, label + ": tensor \"" + tensor + "\" is missing from shard " + shard);
            }
        }
    } else if (exists_at(d.fd, single_name)) {
        Shard* s = add_shard(single_name);
        for (const auto& t : s->header.tensors) ck->tensors_.emplace(t.name, Ref{s, &t});
    } else {
        fail(Status::kNotFound, dir + ": neither " + single_name + " nor " + index_name + " found");
    }
    return ck;
}

const Checkpoint::Ref* Checkpoint::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace cn::format
