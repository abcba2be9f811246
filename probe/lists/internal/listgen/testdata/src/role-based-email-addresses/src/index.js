const MARKETING = [
  'sales',
  'alexa', // a name
];

const OTHER = [
  'Admin',
  'no-reply',
  'sales',
];

module.exports = [...MARKETING, ...OTHER];

module.exports.MARKETING = MARKETING;
