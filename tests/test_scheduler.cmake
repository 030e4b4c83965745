# Runs on ../shared/models/stories260K.gguf; exits 77 (skipped) when it is absent.
set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
