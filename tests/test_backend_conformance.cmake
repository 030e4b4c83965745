# The suite has its own main (it takes the backend to test), so it is not a check
# program; a second entry runs it on the CUDA backend, skipped (77) where none is usable.
add_test(NAME test_backend_conformance_cuda COMMAND test_backend_conformance --backend cuda
         WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(test_backend_conformance_cuda PROPERTIES SKIP_RETURN_CODE 77)
# The suite must notice a backend whose rmsnorm and matmul are off by 0.1 %.
add_test(NAME test_backend_conformance_detects COMMAND test_backend_conformance --perturb
         WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(test_backend_conformance_detects PROPERTIES WILL_FAIL TRUE)
