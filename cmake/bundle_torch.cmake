# Install-time script (CN_BUNDLE_TORCH=ON): copies the shared libraries libcutenative.so loads from the torch
# wheel (LibTorch's lib/ and the nvidia-* wheels' lib/ directories) into ${CN_BUNDLE_DEST}, so that an installed
# prefix runs on another machine of the same OS with no environment variables. The set is the NEEDED closure of
# the build tree's libcutenative.so (resolved through its absolute build RUNPATH and the libraries' own
# $ORIGIN RPATHs), plus the libraries LibTorch and cuDNN open with dlopen when their parent is in the closure.
# System libraries (libc, libstdc++, libm, ...) are left to the target machine.
# Inputs: CN_BUNDLE_LIB (the build tree's library), CN_BUNDLE_ROOT (the site-packages directory holding torch/
# and nvidia/), CN_BUNDLE_DEST (absolute install directory; DESTDIR is honoured), CN_BUNDLE_INSTALLED_LIB (the
# installed library, whose RUNPATH is set to $ORIGIN:$ORIGIN/cutenative; optional).
cmake_policy(PUSH)
cmake_policy(VERSION 3.21)
foreach(_v CN_BUNDLE_LIB CN_BUNDLE_ROOT CN_BUNDLE_DEST)
  if(NOT ${_v})
    message(FATAL_ERROR "bundle_torch.cmake: ${_v} is not set")
  endif()
endforeach()

string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" _root_re "${CN_BUNDLE_ROOT}")

function(cn_closure out)
  file(GET_RUNTIME_DEPENDENCIES
    LIBRARIES ${ARGN}
    RESOLVED_DEPENDENCIES_VAR _resolved
    UNRESOLVED_DEPENDENCIES_VAR _unresolved
    # The CUDA driver is the target machine's (never in a wheel); libcudart opens it with dlopen anyway.
    PRE_EXCLUDE_REGEXES "^libcuda\\.so"
    POST_INCLUDE_REGEXES "^${_root_re}/"
    POST_EXCLUDE_REGEXES ".*")
  if(_unresolved)
    message(FATAL_ERROR "bundle_torch.cmake: unresolved dependencies of ${ARGN}: ${_unresolved}")
  endif()
  set(${out} ${_resolved} PARENT_SCOPE)
endfunction()

cn_closure(_libs "${CN_BUNDLE_LIB}")
# Libraries opened with dlopen by a library of the closure (not NEEDED, so not found above).
set(_extra "")
foreach(_l IN LISTS _libs)
  get_filename_component(_dir "${_l}" DIRECTORY)
  get_filename_component(_name "${_l}" NAME)
  if(_name STREQUAL "libtorch_cuda.so")
    file(GLOB _g "${_dir}/libtorch_cuda_linalg.so" "${_dir}/libcaffe2_nvrtc.so")
  elseif(_name MATCHES "^libcudnn\\.so")
    file(GLOB _g "${_dir}/libcudnn_*.so*")
  elseif(_name MATCHES "^libnvrtc\\.so")
    file(GLOB _g "${_dir}/libnvrtc-builtins*.so*")
  else()
    set(_g "")
  endif()
  list(APPEND _extra ${_g})
endforeach()
if(_extra)
  cn_closure(_more ${_extra})
  list(APPEND _libs ${_extra} ${_more})
endif()
list(REMOVE_DUPLICATES _libs)
list(SORT _libs)
file(INSTALL ${_libs} DESTINATION "${CN_BUNDLE_DEST}" FOLLOW_SYMLINK_CHAIN)

# The installed library finds the bundle (and nothing absolute): $ORIGIN for itself, $ORIGIN/cutenative for
# LibTorch. In place (the new value is shorter than the absolute build-time one it replaces).
if(CN_BUNDLE_INSTALLED_LIB)
  file(RPATH_SET FILE "$ENV{DESTDIR}${CN_BUNDLE_INSTALLED_LIB}" NEW_RPATH "$ORIGIN:$ORIGIN/cutenative")
endif()
cmake_policy(POP)
