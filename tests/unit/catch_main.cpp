// The Catch2 main, compiled once for the whole unit-test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
