#include "common.h"
Test(placeholder_api, none) {}
