# The CUDA plugin's step log (pure C) runs here on the CPU backend, in every build.
target_sources(test_step_replay PRIVATE ${PROJECT_SOURCE_DIR}/plugins/backend-cuda/cuda_step_log.c)
target_include_directories(test_step_replay PRIVATE ${PROJECT_SOURCE_DIR}/plugins/backend-cuda)
# On the CUDA backend: its graphs against none, skipped (77) where no device is usable.
add_test(NAME test_step_replay_cuda COMMAND test_step_replay --backend cuda WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(test_step_replay_cuda PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "CK_DEFAULT_TIMEOUT=600")
