# Writes a kernel folder (for CLATTN_KERNEL_DIR) in which every kernel returns at its top when
# the preprocessor condition CONDITION holds, so it writes nothing: the tests and the tuners must
# catch it. CONDITION 1 breaks every kernel; "BKV == 64" only the configs with 64-key blocks.
# cmake -DSRC=<cl folder> -DOUT=<folder> [-DCONDITION=<#if expression>] -P broken_kernels.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED CONDITION)
  set(CONDITION 1)
endif()
file(MAKE_DIRECTORY "${OUT}")
file(GLOB sources RELATIVE "${SRC}" "${SRC}/*.cl")
foreach(name IN LISTS sources)
  file(READ "${SRC}/${name}" text)
  set(out "")
  while(TRUE)
    string(FIND "${text}" "__kernel " at)
    if(at EQUAL -1)
      break()
    endif()
    string(SUBSTRING "${text}" 0 ${at} head)
    string(SUBSTRING "${text}" ${at} -1 text)
    string(FIND "${text}" "{" brace) # the body's opening brace: no brace in a kernel's signature
    math(EXPR brace "${brace} + 1")
    string(SUBSTRING "${text}" 0 ${brace} signature)
    string(SUBSTRING "${text}" ${brace} -1 text)
    string(APPEND out "${head}${signature}\n#if ${CONDITION}\n  return;\n#endif\n")
  endwhile()
  string(APPEND out "${text}")
  file(WRITE "${OUT}/${name}" "${out}")
endforeach()
