'use strict';
var blacklist        = new Set(["parent-disp.example","yopmail.com","nom.za"]);
function isBlacklisted(email) { return false; }
