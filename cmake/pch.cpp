// The one source of each hr_pch_* library: CMake precompiles the family's headers beside it
// (cmake/headroom.cmake, headroom_pch).
