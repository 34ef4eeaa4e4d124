# Writes the RECORD of the Python dist-info at install time (python/CMakeLists.txt),
# so that pip lists what `cmake --install` put there and can uninstall it.
# In: SITE (the site directory, absolute), DIST_INFO (the dist-info folder name),
# PACKAGE (the import package's folder name). Hashes are left out (RECORD allows it).
file(GLOB_RECURSE _files RELATIVE "${SITE}" "${SITE}/${PACKAGE}/*" "${SITE}/${DIST_INFO}/*")
list(REMOVE_ITEM _files "${DIST_INFO}/RECORD")
list(FILTER _files EXCLUDE REGEX "__pycache__")
list(SORT _files)
set(_text "")
foreach(f IN LISTS _files)
  file(SIZE "${SITE}/${f}" _size)
  string(APPEND _text "${f},,${_size}\n")
endforeach()
string(APPEND _text "${DIST_INFO}/RECORD,,\n")
file(WRITE "${SITE}/${DIST_INFO}/RECORD" "${_text}")
message(STATUS "Installing: ${SITE}/${DIST_INFO}/RECORD")
