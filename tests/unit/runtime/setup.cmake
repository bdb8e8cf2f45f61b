# Test set-up for the runtime concern's CLI cases: a random tiny checkpoint with DSpark stages,
# written at test time by aff_make_dspark_model (unit/runtime/make_dspark_model.cpp) into the
# build tree for the cases named dspark-*.sh (tests/CMakeLists.txt hands them its directory in
# AFF_DSPARK_MODEL_DIR). The unit tests write their own copy.
add_executable(aff_make_dspark_model ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime/make_dspark_model.cpp)
target_link_libraries(aff_make_dspark_model PRIVATE aff)
set(AFF_DSPARK_MODEL_DIR ${CMAKE_BINARY_DIR}/test-data/dspark-v4)
add_test(NAME setup.dspark_model COMMAND aff_make_dspark_model ${AFF_DSPARK_MODEL_DIR})
set_tests_properties(setup.dspark_model PROPERTIES FIXTURES_SETUP dspark_model)
