# The files the symbol test reads: the static core and kernels, and, except in an
# appliance build (where everything is one static program), libcinfer.so and the two
# programs that must link it.
if(CINFER_STATIC_PLUGINS)
  set(symbols_core $<TARGET_FILE:cinfer>)
  set(symbols_shared "")
  set(symbols_cli "")
  set(symbols_worker "")
else()
  set(symbols_core $<TARGET_FILE:cinfer_internal>)
  set(symbols_shared $<TARGET_FILE:cinfer>)
  set(symbols_cli $<TARGET_FILE:cinfer_cli>)
  set(symbols_worker $<TARGET_FILE:cinfer_worker>)
endif()
if(TARGET cinfer_kernels)
  set(symbols_kernels $<TARGET_FILE:cinfer_kernels>)
else()
  set(symbols_kernels "")
endif()
target_compile_definitions(test_symbols PRIVATE
  CINFER_CORE_ARCHIVE="${symbols_core}" CINFER_KERNELS_ARCHIVE="${symbols_kernels}"
  CINFER_SHARED_LIBRARY="${symbols_shared}" CINFER_CLI_PROGRAM="${symbols_cli}"
  CINFER_WORKER_PROGRAM="${symbols_worker}")
add_dependencies(test_symbols cinfer_cli cinfer_worker)
