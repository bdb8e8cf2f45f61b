# Test set-up for the serve concern: the model engine tests need the real tokenizer.json
# (fixture from tests/unit/tokenizer/setup.cmake) and a random tiny DeepSeek-V4
# checkpoint with the real vocabulary, written at test time by aff_make_random_model
# (tests/serve/make_random_model.cpp) instead of being committed. The node client tests
# (tests/serve) serve the same checkpoint.
add_executable(aff_make_random_model ${CMAKE_CURRENT_SOURCE_DIR}/serve/make_random_model.cpp)
target_link_libraries(aff_make_random_model PRIVATE aff)
set(AFF_RANDOM_MODEL_DIR ${CMAKE_BINARY_DIR}/test-data/random-v4)
add_test(NAME setup.random_model COMMAND aff_make_random_model ${AFF_RANDOM_MODEL_DIR})
set_tests_properties(setup.random_model PROPERTIES FIXTURES_SETUP random_model)
set_tests_properties(unit.serve PROPERTIES FIXTURES_REQUIRED "random_model;tokenizer_json")
target_compile_definitions(aff_unit_tests PRIVATE AFF_RANDOM_MODEL_DIR="${AFF_RANDOM_MODEL_DIR}")
