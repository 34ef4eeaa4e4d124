# tests/python: the Python module's pytest suites, one CTest test per file.
# Included by tests/CMakeLists.txt. Each runs through run_pytest.py, which
# puts ${CMAKE_BINARY_DIR}/python (the assembled package) on PYTHONPATH and
# exits 77 (skip, with the reason printed) when pytest or the module is missing.
if(DEFINED Python3_EXECUTABLE)
  set(_spw_python ${Python3_EXECUTABLE})
elseif(EXISTS /usr/bin/python3)
  set(_spw_python /usr/bin/python3)  # Debian's, with numpy/dask/distributed
else()
  find_program(_spw_python python3)
endif()

if(_spw_python)
  file(GLOB _spw_py_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
  foreach(_file ${_spw_py_tests})
    get_filename_component(_name ${_file} NAME_WE)
    add_test(NAME python/${_name}
             COMMAND ${_spw_python} ${CMAKE_CURRENT_LIST_DIR}/run_pytest.py ${CMAKE_BINARY_DIR}/python ${_file}
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    # No __pycache__ in the source tree.
    set_tests_properties(python/${_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                         ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
  endforeach()
  # The Dask cluster tests start worker processes and time their spilling:
  # give them the machine.
  foreach(_name test_dask_cluster test_dask_cli_cluster)
    if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/${_name}.py)
      set_tests_properties(python/${_name} PROPERTIES RUN_SERIAL TRUE)
    endif()
  endforeach()
endif()
