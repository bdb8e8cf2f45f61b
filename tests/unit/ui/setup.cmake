# Test set-up for the ui concern: a stand-in for NVML (libnvidia-ml.so.1) with fixed
# readings, built as a shared library so gpu_monitor_test loads it through dlopen the way
# the live view loads the driver's, on machines without a GPU.
add_library(aff_fake_nvml SHARED ${CMAKE_CURRENT_SOURCE_DIR}/unit/ui/fake_nvml.c)
set_target_properties(aff_fake_nvml PROPERTIES C_VISIBILITY_PRESET default)
add_dependencies(aff_unit_tests aff_fake_nvml)
target_compile_definitions(aff_unit_tests PRIVATE AFF_FAKE_NVML="$<TARGET_FILE:aff_fake_nvml>")
