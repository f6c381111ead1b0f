# tests/tools.mk — the crmm program: check-config over tests/configs/, --help, info (no GPU).
# A script: automake runs it from the top build directory, where the program is ./tools/crmm
# (in a VPATH build too; the script itself is then found in the source tree).
TESTS += tests/check_tools.sh
EXTRA_DIST += tests/check_tools.sh
