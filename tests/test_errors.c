#include "common.h"
Test(placeholder_errors, none) {}
