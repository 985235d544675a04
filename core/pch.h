// Precompiled header of the LibTorch-facing core: the ATen pieces every model and runtime file uses.
// Only the build includes it (target_precompile_headers); sources still include what they use.
#pragma once

#include <ATen/Functions.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>
