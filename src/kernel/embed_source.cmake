# cmake -DINPUT=kernel.py -DOUTPUT=kernel_source.cc -P embed_source.cmake: the source as a C++
# string (raw literal pieces: one literal may hold at most 64 KiB on some compilers).
file(READ ${INPUT} source)
string(FIND "${source}" ")codebox\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )codebox\"")
endif()
string(LENGTH "${source}" length)
set(pieces "")
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${source}" ${offset} 8000 piece)
  string(APPEND pieces "R\"codebox(${piece})codebox\"\n")
  math(EXPR offset "${offset} + 8000")
endwhile()
file(WRITE ${OUTPUT}.tmp "// Generated from src/kernel/kernel.py by embed_source.cmake; do not edit.\n"
     "#include \"kernel/session.h\"\n\nnamespace codebox::kernel {\n\nconst char kKernelSource[] =\n"
     "${pieces};\n\n}  // namespace codebox::kernel\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
